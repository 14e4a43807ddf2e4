"""The C client's long and infinite timeouts (clients/c/src/send_held.c `mt_ms`).

ZeroMQ takes milliseconds in an int (SNDTIMEO, LINGER): a bound past INT_MAX ms (24.8
days) cast to int was undefined (INT_MIN on x86, which zmq_setsockopt refuses: a
send_timeout of 30 days failed mt_client_start at once, MT_EZMQ), and +inf seconds went
through the same casts. Now +inf is "forever", as a negative timeout, and a finite bound
past ZeroMQ's is capped at INT_MAX ms."""

from __future__ import annotations

import ctypes
import ctypes.util
from pathlib import Path

import pytest
from c_driver import capture, lines_of, run_script, script_exe  # noqa: F401 (fixtures)
from compiled import CClient, c_client  # noqa: F401

from melissa_trainer import wire as P

pytestmark = pytest.mark.e2e  # starts a compiled driver

THIRTY_DAYS = 30 * 86400.0
INT_MAX = 2**31 - 1
COUNT = 1 << 17  # float64: 1 MiB, sent without a copy (ZeroMQ holds it until it is out)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("timeout", ["inf", repr(THIRTY_DAYS)], ids=["inf", "30_days"])
def test_sends_and_close_with_a_long_or_infinite_timeout_deliver_everything(
    script_exe: Path,  # noqa: F811
    capture: object,  # noqa: F811
    tmp_path: Path,
    timeout: str,
) -> None:
    """Neither fails nor returns at once: every step reaches a real socket, then the BYE."""
    cap = capture(1)  # type: ignore[operator]
    script = (
        f"id 1\nendpoints {cap.endpoints[0]}\nsend_timeout {timeout}\nclose_timeout {timeout}\n"
        f"batching 0 1\nreuse immediate\nfield u 2 1 {COUNT}\nstart\n"
        + "".join(f"send {t} u 2 {COUNT} {t}\n" for t in range(4))
        + "close\n"
    )
    got = lines_of(run_script(script_exe, script, tmp_path))
    assert [status for status, _ in got] == [0] * len(got), got
    (messages,) = cap.until_bye()
    kinds = [frames[0][P.KIND_AT] for frames in messages]
    assert kinds.count(P.DATA) == 4 and kinds[-1] == P.BYE


@pytest.fixture(scope="module")
def lib(c_client: CClient) -> ctypes.CDLL:  # noqa: F811
    if c_client.sanitize:
        # ASan's runtime must be the process's first library: Python has not got it (the
        # C programs of the other tests link it themselves)
        pytest.skip("loads the library into Python (ctypes): not under MT_TEST_SANITIZE")
    out = ctypes.CDLL(str(c_client.lib_dir / "libmelissa_trainer_client.so"))
    out.mt_now.restype = ctypes.c_double
    out.mt_arm.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double]
    out.mt_client_create.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    out.mt_client_abort.argtypes = [ctypes.c_void_p]
    return out


@pytest.mark.timeout(60)
def test_a_send_bound_past_int_milliseconds_is_capped_not_forever(lib: ctypes.CDLL) -> None:
    """White box (the library's internal `mt_arm`, on a socket of the libzmq it links):
    a 30-day deadline arms SNDTIMEO with ZeroMQ's longest bound (it failed: EINVAL from
    the INT_MIN the cast gave), and a short one with what is left of it."""
    zmq = ctypes.CDLL(ctypes.util.find_library("zmq") or "libzmq.so.5")
    zmq.zmq_ctx_new.restype = ctypes.c_void_p
    zmq.zmq_socket.restype = ctypes.c_void_p
    zmq.zmq_socket.argtypes = [ctypes.c_void_p, ctypes.c_int]
    zmq.zmq_getsockopt.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    zmq.zmq_close.argtypes = [ctypes.c_void_p]
    zmq.zmq_ctx_term.argtypes = [ctypes.c_void_p]
    zmq_push, zmq_sndtimeo = 8, 28  # (zmq.h)
    client = ctypes.c_void_p()
    assert lib.mt_client_create(ctypes.byref(client)) == 0
    ctx = zmq.zmq_ctx_new()
    sock = zmq.zmq_socket(ctx, zmq_push)
    try:
        got = []
        for seconds in (THIRTY_DAYS, INT_MAX / 1000 + 1, 1.5):
            assert lib.mt_arm(client, sock, lib.mt_now() + seconds) == 0
            value, size = ctypes.c_int(0), ctypes.c_size_t(ctypes.sizeof(ctypes.c_int))
            assert (
                zmq.zmq_getsockopt(sock, zmq_sndtimeo, ctypes.byref(value), ctypes.byref(size)) == 0
            )
            got.append(value.value)
        assert got[:2] == [INT_MAX, INT_MAX]
        assert 1000 <= got[2] <= 1500  # (the time the calls took is gone from it)
    finally:
        zmq.zmq_close(sock)
        zmq.zmq_ctx_term(ctx)
        lib.mt_client_abort(client)
