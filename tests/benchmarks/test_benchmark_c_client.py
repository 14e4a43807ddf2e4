"""benchmarks/c_client.py: its drainer counts what it is sent as the protocol says (the
benchmark's arms stop their clocks on that count), and the command itself end to end in
quick mode gives every row, well formed. No speed is asserted: the figures are for
people to read. Skipped, with the reason, without cmake, a C compiler or libzmq."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zmq
from compiled import c_toolchain_missing

from melissa_trainer import wire as P

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS / "c"))
from bench_programs import MissingTool, compile_program  # noqa: E402

pytestmark = pytest.mark.e2e  # every test here starts a process

SKIP_EXIT = 77  # c_client.py: a tool is missing
CPU_CASES = {"c_send_1KB_cpu", "c_send_1KB_thread_cpu", "c_send_1MB_cpu", "c_send_1MB_thread_cpu"}
E2E_CASES = {"c_e2e_1KB_x1", "c_e2e_1KB_x4", "c_e2e_1MB_x1", "c_e2e_1MB_x4"}


@pytest.fixture(scope="module")
def drain_program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return compile_program("drain", tmp_path_factory.mktemp("drain"))
    except MissingTool as e:
        pytest.skip(f"cannot build benchmarks/c/drain.c: {e}")


def _frames(kind_of: str) -> list[list[bytes]]:
    """The messages of one test stream: HELLO, an INLINE DATA, a two-frame DATA, a BATCH
    of 3 records, BYE (5 records in all)."""
    spec = P.FieldSpec("u", np.dtype("<f4"), (2,))
    payload = np.ones(2, np.float32).tobytes()
    header = P.encode_data_header(7, 0, 0, 1, b"u", 1, (2,), 0, 2, inline=True)
    two = P.encode_data_header(7, 1, 0, 1, b"u", 1, (2,), 0, 2, inline=False)
    batch = P.encode_batch_header(7, 3, 0, 1, b"u", 1, (2,), 0, 2)
    records = b"".join(P.U64.pack(t) + payload for t in (2, 3, 4))
    return [
        [P.encode_hello(7, 0, 1, [spec])],
        [header + payload],
        [two, payload],
        [batch + records],
        [P.encode_bye(7, 0, 1, 5)],
    ]


@pytest.mark.timeout(30)
def test_drainer_counts_records_and_answers_when_all_arrived(drain_program: Path) -> None:
    proc = subprocess.Popen([str(drain_program), "16"], stdout=subprocess.PIPE, text=True)
    ctx = zmq.Context()
    sockets = []
    try:
        assert proc.stdout is not None
        endpoints = json.loads(proc.stdout.readline())
        control = ctx.socket(zmq.REQ)
        control.connect(endpoints["control"])
        sockets.append(control)
        for name in ("ours", "raw"):
            push = ctx.socket(zmq.PUSH)
            push.connect(endpoints[name])
            sockets.append(push)
            # asked first: answered only once the 5 records have arrived
            control.send(f"{name} 5".encode())
            assert control.poll(200) == 0
            for message in _frames(name):
                push.send_multipart(message)
            assert control.poll(10_000), f"no answer once the {name} records arrived"
            assert control.recv() == b"ok 5"
        control.send(b"quit")
        assert control.recv() == b"bye"
        assert proc.wait(10) == 0
    finally:
        for s in sockets:
            s.close(linger=0)
        ctx.term()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.mark.timeout(30)
def test_drainer_fails_on_a_frame_that_is_not_protocol(drain_program: Path) -> None:
    proc = subprocess.Popen(
        [str(drain_program), "16"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    try:
        assert proc.stdout is not None
        push.connect(json.loads(proc.stdout.readline())["raw"])
        push.send(b"not a protocol message")
        assert proc.wait(10) == 1
        assert proc.stderr is not None
        assert "not a protocol v2 message" in proc.stderr.read()
    finally:
        push.close(linger=0)
        ctx.term()
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_json_gives_every_row_well_formed(tmp_path: Path) -> None:
    missing = c_toolchain_missing()
    if missing:
        pytest.skip(missing)
    # one round (not 2: 14.7 -> 8.2 s here) gives every row, each arm run and its records
    # counted as with more: the rows' shape, not their medians, is what is checked here
    command = [sys.executable, str(BENCHMARKS / "c_client.py"), "--quick", "--json",
               "--rounds", "1", "--build-dir", str(tmp_path / "build")]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=540)
    if done.returncode == SKIP_EXIT:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)["rows"]
    assert {r["case"] for r in rows} == CPU_CASES | E2E_CASES
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        for key in ("ours", "baseline", "ratio"):
            assert isinstance(r[key], float | int) and math.isfinite(r[key]) and r[key] > 0, r
        cpu = r["case"] in CPU_CASES
        assert r["unit"] == ("us/send" if cpu else "samples/s"), r
        # higher is better: baseline / ours for CPU time, ours / baseline for rates
        expected = r["baseline"] / r["ours"] if cpu else r["ours"] / r["baseline"]
        assert r["ratio"] == pytest.approx(expected, rel=0.01, abs=0.002), r
    targets = {r["case"]: r["target"] for r in rows}
    assert targets["c_send_1KB_cpu"] == pytest.approx(1 / 1.5, abs=1e-3)
    assert targets["c_send_1MB_cpu"] == pytest.approx(1 / 1.1, abs=1e-3)
    assert targets["c_send_1KB_thread_cpu"] is None
    assert all(targets[case] == 1.0 for case in E2E_CASES)
