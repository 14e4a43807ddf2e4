"""The C client's `mt_predict` when the trainer's process is gone (SIGKILL, SIGTERM):
the request falls back (`MT_ETIMEDOUT`) as soon as the connection says so, not at the
end of its timeout, as the Python client's `Predictor` does
(tests/client/test_predict_trainer_gone.py, whose scenarios these are).

Found in the guide (docs/how-to/serve-while-training.md): after a SIGKILL or a clean stop
of the trainer each C request waited its whole timeout. Now a request whose connection
drops while it waits, and one whose endpoint refuses the connection (a dead trainer's
port), return `MT_ETIMEDOUT` at once, saying which; after a trainer that served this
simulation removed its serve file (a clean stop), requests fail at once too; for a
backoff after such a failure (0.05 s doubling to 1 s), requests fail without dialling
(no socket per request: a solver asking in a loop does not run out of descriptors); a
trainer that comes back is found again. A server that refuses the client's CURVE
handshake is not a trainer gone (its port answers): test_c_predict_curve_refused.py.

Real processes and sockets: the C client is `mt_script` (clients/c/tests/mt_script.c),
the server a `PredictServer` in a process of its own, killed with SIGKILL or SIGTERM.
Every request is given `LONG` seconds, more than the test's own timeout: a request that
waits for its timeout fails the test.
"""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest
from predict_runs import ASK, CPredict
from predict_script import MT_ETIMEDOUT, Script, dead_endpoint, outputs_of
from server_process import kill_all, start_server
from waiting import wait_until

from melissa_trainer.stream.serving_rendezvous import read_serving

pytestmark = pytest.mark.e2e  # every test here starts a process

#: longer than the tests' own timeouts: a request that waits for it fails the test
LONG = 120


def ask(script: Script) -> tuple[int, str, list[str]]:
    """One request of `LONG` seconds: its status, message and output lines."""
    lines = script.wait(script.send(f"predict {LONG}"))
    code, _, message = lines[-1].partition(" ")
    return int(code), message.strip(), lines


def answered_again(script: Script) -> int:
    """Ask until answered (the requests of a backoff fail at once, saying so): the
    version of the answer."""
    while True:
        code, message, lines = ask(script)
        if code == 0:
            return outputs_of({0: lines}, 0)[0]
        assert code == MT_ETIMEDOUT and "at an earlier request" in message, message


@pytest.mark.timeout(60)
def test_a_request_waiting_when_the_trainer_is_killed_falls_back_at_once(
    c_predict: CPredict, tmp_path: Path
) -> None:
    first, endpoint = start_server(tmp_path, 1, hold=True)
    second = None
    rendezvous = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    try:
        with c_predict.script(rendezvous, 0) as script:
            code, message, lines = ask(script)
            assert (code, outputs_of({0: lines}, 0)[0]) == (0, 1), message
            waiting = script.send(f"predict {LONG}")
            assert first.stdout is not None and first.stdout.readline().strip() == "holding"
            first.send_signal(signal.SIGKILL)  # while the request waits for its answer
            first.wait()
            held, _, message = script.wait(waiting)[-1].partition(" ")
            # (before the fix: LONG seconds, past the test's timeout)
            assert int(held) == MT_ETIMEDOUT, message
            assert "was lost while the request waited" in message and endpoint in message

            # The dead trainer's serve file stays (SIGKILL): its port refuses the
            # connection; the next requests fail at once (the backoff's, or the refusal's).
            entry, _ = read_serving(tmp_path / "rv", 0, None)
            assert entry is not None and entry["endpoint"] == endpoint
            for _ in range(3):
                code, message, _ = ask(script)
                assert code == MT_ETIMEDOUT, message
                assert "at an earlier request" in message or "refused the connection" in message

            second, endpoint2 = start_server(tmp_path, 2, hold=False)  # a trainer again
            assert endpoint2 != endpoint
            assert answered_again(script) == 2
            script.finish()
    finally:
        kill_all(first, second)


@pytest.mark.timeout(60)
def test_after_a_trainer_that_served_stops_cleanly_requests_fall_back_at_once(
    c_predict: CPredict, tmp_path: Path
) -> None:
    """SIGTERM: the trainer removes its serve file and closes its socket. The requests
    after that had each waited their whole timeout (for a connection, then for a serve
    file, as for a trainer not started yet); a simulation that was served there knows
    better: it falls back at once, and finds a trainer that comes back."""
    first, endpoint = start_server(tmp_path, 1, hold=False)
    second = None
    rendezvous = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    try:
        with c_predict.script(rendezvous, 0) as script:
            assert ask(script)[0] == 0
            first.send_signal(signal.SIGTERM)
            assert first.wait() == 143
            assert read_serving(tmp_path / "rv", 0, None)[0] is None  # its file removed
            code, message, _ = ask(script)  # the socket's connection was dropped: refused
            assert code == MT_ETIMEDOUT and "refused the connection" in message, message
            assert endpoint in message
            while True:  # (the backoff's requests, then one that looks at the rendezvous)
                code, message, _ = ask(script)
                assert code == MT_ETIMEDOUT, message
                if "at an earlier request" not in message:
                    break
            said = (  # (one story, as Python's: not "... there (yet) (the trainer ... stopped)")
                f"no serving endpoint in '{tmp_path / 'rv'}': the trainer that served this "
                "simulation stopped (no trainer serves predictions there)"
            )
            assert message.startswith(said) and "(yet)" not in message, message
            second, _ = start_server(tmp_path, 2, hold=False)
            assert answered_again(script) == 2
            script.finish()
    finally:
        kill_all(first, second)


@pytest.mark.timeout(60)
def test_a_trainer_that_publishes_itself_ends_the_backoff(
    c_predict: CPredict, tmp_path: Path
) -> None:
    """A trainer that comes back while a C solver is in its backoff is asked at the
    first request after it published its serve file, not a backoff later: the backoff
    ends once the rendezvous directory changed since the last lookup, as the Python
    predictor's (tests/client/test_predict_trainer_gone.py). Found in a user's trial
    (a solver asking at every step, its trainer SIGKILLed and restarted 50 times): the
    C solver got no answer for up to a second after each restart (the Python one within
    milliseconds), and none at all from a trainer killed again within that second.

    The second trainer serves before the first is killed, its serve file aside; it is
    moved into the rendezvous (a rename, as a trainer publishes) once a backoff of 0.5 s
    or more is under way, and the next request must be answered by it."""
    first, _ = start_server(tmp_path, 1, hold=False)
    aside = tmp_path / "aside"
    aside.mkdir()
    second, _ = start_server(aside, 2, hold=False)  # (its serve file in aside/rv)
    rendezvous = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    try:
        with c_predict.script(rendezvous, 0) as script:
            assert ask(script)[0] == 0
            kill_all(first)  # (SIGKILL: its serve file stays, its port refuses)
            while True:  # the backoffs double while the trainer stays away
                code, message, _ = ask(script)
                assert code == MT_ETIMEDOUT, message
                left = re.search(r"the next attempt in ([0-9.]+) s at most", message)
                if left is not None and float(left[1]) >= 0.5:
                    break
            os.replace(aside / "rv" / "serve_0.json", tmp_path / "rv" / "serve_0.json")
            code, message, lines = ask(script)
            # (before the fix: MT_ETIMEDOUT "... (at an earlier request; the next
            # attempt in 0.5x s at most)")
            assert code == 0, message
            assert outputs_of({0: lines}, 0)[0] == 2
            script.finish()
    finally:
        kill_all(first, second)


def wait_for_files(script: Script, most: int) -> None:
    """Until the script holds at most `most` descriptors (ZeroMQ's reaper thread closes a
    closed socket's); fail, with the count, if it never does."""
    wait_until(
        lambda: script.open_files() <= most,
        lambda: f"{script.open_files()} descriptors held, never back to {most}",
        30,
    )


def assert_backoff_held(loop: list[str]) -> None:
    """`loop`, the status lines of requests asked in a loop while the trainer is gone,
    all fell back, and most without dialling (the backoff's)."""
    assert all(line.startswith(f"{MT_ETIMEDOUT} ") for line in loop), set(loop)
    # (a backoff's message repeats why: the dial's, "... refused the connection ...")
    waits = sum("at an earlier request" in line for line in loop)
    dials = sum(
        "refused the connection: nothing listens there" in line
        and "at an earlier request" not in line
        for line in loop
    )
    assert dials + waits == len(loop) and dials >= 1
    # (a dial per request would be len(loop); the backoff, of 0.05 s and more, lets
    # through one dial per backoff elapsed, a handful over a loop of microseconds a request)
    assert dials < len(loop) // 2, dials


@pytest.mark.timeout(120)
def test_setting_the_same_serve_endpoints_at_every_step_keeps_the_backoff(
    c_predict: CPredict,
) -> None:
    """A solver that sets its serving endpoints before every request (they may change)
    while the trainer is gone: the same endpoints again (blanks aside, Python's
    str.strip's: also U+3000 and the no-break space) do not end the backoff. Before the
    fix each mt_set_serve_endpoints ended it, and every request dialled (a socket and a
    monitor each, thousands a second); and (hcpar) a list wrapped in Unicode blanks was
    taken for other endpoints (ASCII isspace), ending it every other request."""
    gone = dead_endpoint()
    with c_predict.script(sim=0, max_files=256) as script:
        first = script.line + 2
        spelled = [  # (the same list, spaced otherwise)
            f"serve {gone}",
            f"serve  {gone} ",
            f"serve \u3000{gone}\xa0",
            f"serve {gone}\u2028",
        ]
        asked = script.send(*[x for n in range(1000) for x in (spelled[n % 4], f"predict {LONG}")])
        lines, _ = script.finish()
    assert all(lines[n][-1].split() == ["0"] for n in range(first - 1, asked, 2))
    assert_backoff_held([lines[n][-1] for n in range(first, asked + 1, 2)])


@pytest.mark.timeout(120)
def test_while_the_trainer_is_gone_requests_fail_without_a_socket_each(
    c_predict: CPredict,
) -> None:
    """A solver asking in a loop while its trainer is gone. After a failure that found
    the trainer gone, the requests of the backoff fail at once without dialling (their
    message says so; one that dialled says the connection was refused); and a request
    that dials leaves no descriptor behind (its socket and its monitor closed): under
    a limit of 256 open files, 400 requests that each dial (setting other endpoints
    ends a backoff: here lists that differ, whose entry for simulation 0 is the same dead
    endpoint) all fall back, none fails for want of a descriptor."""
    gone = dead_endpoint()
    with c_predict.script(sim=0, ask=[f"serve {gone}", *ASK], max_files=256) as script:
        first = script.line + 1
        asked = script.send(*[f"predict {LONG}"] * 1000)
        script.wait(asked)
        settled = script.open_files()
        dialled = script.line + 2
        other = [f"serve {gone},{gone}", f"predict {LONG}", f"serve {gone}", f"predict {LONG}"]
        for _ in range(20):
            # ZeroMQ closes a socket's descriptors on its own thread, later: under load a
            # burst of dials can run ahead of it. So the dials go in chunks of 20 (about 4
            # descriptors each, well under the limit), and each chunk's descriptors must be
            # given back before the next: a leak (one kept per dial) never settles.
            chunk = script.send(*other * 10)
            script.wait(chunk)
            wait_for_files(script, settled + 8)
        redialled = script.line
        lines, _ = script.finish()
    loop = [lines[n][-1] for n in range(first, asked + 1)]
    assert_backoff_held(loop)
    each = [lines[n][-1] for n in range(dialled, redialled + 1, 2)]
    assert len(each) == 400
    assert all(line.startswith(f"{MT_ETIMEDOUT} ") for line in each), set(each)
    assert not any("at an earlier request" in line for line in each), set(each)
    assert all("refused the connection" in line for line in each), set(each)
