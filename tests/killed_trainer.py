"""A stand-in trainer for the tests of a rendezvous whose trainer was killed
(`trainer_process`): a real process that binds a ZeroMQ PULL socket per rank and
publishes it with the receiver's own writer (`endpoints.write_rendezvous`), as a
trainer's receivers do, then waits until it is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

STAND_IN = """
import sys, time, zmq
from melissa_trainer.stream.endpoints import write_rendezvous
ctx = zmq.Context()
ranks = int(sys.argv[2])
kept = []  # (each socket referenced: one collected is closed, its port refused)
for rank in range(ranks):
    sock = ctx.socket(zmq.PULL)
    kept.append(sock)
    sock.bind("tcp://127.0.0.1:*")
    write_rendezvous(sys.argv[1], rank, ranks, sock.getsockopt_string(zmq.LAST_ENDPOINT),
                     {"run_id": "run-a"})
print("published", flush=True)
sys.stdin.read()  # (until killed, or its stdin closed)
"""


def start_stand_in(rendezvous: Path, ranks: int = 2) -> subprocess.Popen[str]:
    """The stand-in, once its files are written (its "published" line read)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", STAND_IN, str(rendezvous), str(ranks)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "published\n", line
    return proc


def as_elsewhere(rendezvous: Path) -> dict[int, str]:
    """Make each ``rank_N.json`` of `rendezvous` say its trainer runs in another pid
    namespace (a container's, the network shared: its endpoint reached, its pid not
    checkable), as a trainer on another machine; each rank's endpoint, by rank."""
    endpoints = {}
    for path in rendezvous.glob("rank_*.json"):
        entry = json.loads(path.read_text())
        path.write_text(json.dumps({**entry, "pid_scope": "another-boot pid:[4026531836]"}))
        endpoints[entry["rank"]] = entry["endpoint"]
    return endpoints


def kill_9(proc: subprocess.Popen[str]) -> None:
    """SIGKILL `proc` and reap it: its files stay, not marked stopped."""
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL


def stop(proc: subprocess.Popen[str]) -> None:
    """End a stand-in still running (a control's)."""
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


def taken_after_restart(argv: list[str], env: dict[str, str], rendezvous: Path) -> str:
    """Start the solver `argv` against `rendezvous` (its trainer killed), and once it said
    on stderr that the trainer is gone (its notice, `NOTICE_AFTER` s in), start a trainer
    there again (a resume): the solver's stdout, once it ended. It must take the new
    trainer's files, not be refused: its rendezvous timeout leaves it the time."""
    solver = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert solver.stderr is not None
    seen = []
    for line in solver.stderr:  # (until the notice: an event, not a sleep)
        seen.append(line)
        if "is gone without marking it stopped" in line:
            break
    else:
        raise AssertionError(f"no notice of the gone trainer: {''.join(seen)}")
    again = start_stand_in(rendezvous)
    try:
        out, err = solver.communicate(timeout=60)
    finally:
        stop(again)
    assert solver.returncode == 0, err
    return out


class LiveRank:
    """A live receiver's stand-in in this process: a PULL socket bound on 127.0.0.1,
    published as rank 0 of 2 of run ``run-a`` by the receiver's writer, whose monitor
    counts the connections it accepted (`accepted`: each dial of `trainer_listens` is
    one). Close it with `close`."""

    def __init__(self, rendezvous: Path) -> None:
        import zmq

        from melissa_trainer.stream.endpoints import write_rendezvous

        self._context = zmq.Context()
        self._sock = self._context.socket(zmq.PULL)
        self._sock.bind("tcp://127.0.0.1:*")
        self.endpoint = self._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._monitor = self._sock.get_monitor_socket(zmq.EVENT_ACCEPTED)
        self._accepted = 0
        write_rendezvous(rendezvous, 0, 2, self.endpoint, {"run_id": "run-a"})

    def accepted(self) -> int:
        """The connections accepted so far. Each is queued on the monitor as it is
        accepted, before the dialler's handshake can end (the dial's end awaits it)."""
        import zmq
        from zmq.utils.monitor import recv_monitor_message

        while True:
            try:
                event = recv_monitor_message(self._monitor, zmq.NOBLOCK)
            except zmq.Again:
                return self._accepted
            self._accepted += event["event"] == zmq.EVENT_ACCEPTED

    def close(self) -> None:
        self._sock.disable_monitor()
        self._monitor.close(linger=0)
        self._sock.close(linger=0)
        self._context.term()


def with_one_rank_refused(rendezvous: Path, scratch: Path) -> LiveRank:
    """`rendezvous` as two ranks' files whose trainer processes cannot be checked here
    (`as_elsewhere`): rank 0 a `LiveRank`, rank 1 a killed stand-in's (its port
    refused); returns rank 0."""
    dead = start_stand_in(scratch)
    kill_9(dead)
    live = LiveRank(rendezvous)
    (rendezvous / "rank_1.json").write_text((scratch / "rank_1.json").read_text())
    as_elsewhere(rendezvous)
    return live


def rewrite_rank_0(rendezvous: Path) -> None:
    """A new version of rank 0's file (another pid, as a trainer resumed there writes),
    in one rename, as a receiver writes it."""
    path = rendezvous / "rank_0.json"
    entry = json.loads(path.read_text())
    part = path.with_name(".rank_0.json.part")  # (not a rank file: never read)
    part.write_text(json.dumps({**entry, "pid": entry["pid"] + 1}))
    os.replace(part, path)


def publish_elsewhere(rendezvous: Path, rank: int, endpoint: str, scratch: Path) -> None:
    """Rank `rank` of 2 of run ``run-a`` at `endpoint` in `rendezvous`, as another
    machine's trainer (`as_elsewhere`): written by the receiver's writer in `scratch`,
    then renamed in at once (a reader never sees it half-written)."""
    from melissa_trainer.stream.endpoints import write_rendezvous

    write_rendezvous(scratch, rank, 2, endpoint, {"run_id": "run-a"})
    as_elsewhere(scratch)
    os.replace(scratch / f"rank_{rank}.json", rendezvous / f"rank_{rank}.json")
