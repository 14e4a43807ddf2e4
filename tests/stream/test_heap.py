"""keep_freed_memory: frames of large fields are recycled, not mapped again per frame."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream import heap
from melissa_trainer.stream import stream_source as source_module
from melissa_trainer.stream.stream_source import StreamSource

# Rounds of 64 blocks of 1 MiB, written, then freed: the minor page faults of the rounds
# after the first tell whether freed memory was kept (a few) or given back (~256 each).
FAULTS = r"""
import resource, sys
import numpy as np
from melissa_trainer.stream.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
def round_():
    blocks = [np.ones(1 << 17) for _ in range(64)]
    del blocks
round_()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    round_()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", FAULTS, mode], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout)


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc only")
def test_freed_frames_memory_is_kept_instead_of_faulted_in_again() -> None:
    default, kept = _faults("default"), _faults("keep")
    assert default > 4 * 64 * 256 // 2  # most pages of the 4 rounds faulted in again
    assert kept < 64 * 256 // 4  # not even a quarter of one round


def test_keep_freed_memory_is_idempotent() -> None:
    first = heap.keep_freed_memory()
    assert heap.keep_freed_memory() is first
    assert first is sys.platform.startswith("linux")


@pytest.mark.parametrize("keep", [True, False, None])
@pytest.mark.timeout(30)
def test_stream_source_sets_it_at_start_only_when_asked(
    keep: bool | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(source_module.heap, "keep_freed_memory", lambda: calls.append(1) or True)
    # None: the default, which leaves the process's malloc as it is
    source = StreamSource() if keep is None else StreamSource(keep_freed_memory=keep)
    assert calls == []  # nothing before start
    source.start(FIFOBuffer(4), 0, 1)
    try:
        assert calls == ([1] if keep is True else [])
    finally:
        source.stop()


# The same rounds under `recycle_frames`, sized as a receiver sizes it for 1 MiB fields
# (the 64 blocks, and a few more in flight), instead of `keep_freed_memory`.
RECYCLE = FAULTS.replace(
    'if sys.argv[1] == "keep":\n    assert keep_freed_memory()',
    "from melissa_trainer.stream.heap import recycle_frames\n"
    'if sys.argv[1] == "keep":\n    assert recycle_frames(1 << 20, 68 << 20)',
)


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc only")
def test_recycle_frames_keeps_freed_frames_up_to_its_bound() -> None:
    def faults(mode: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", RECYCLE, mode], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    assert faults("default") > 4 * 64 * 256 // 2
    assert faults("keep") < 64 * 256 // 4


# A training process's own blocks, larger than twice a frame (a model's activations: 3 MiB,
# under numpy's 4 MiB hugepage advice), freed and allocated again each step after a
# receiver of 256 KiB frames set its thresholds: glibc's dynamic threshold had risen to
# them at their first free, so they came from the heap; a threshold fixed at twice the
# frame mapped and faulted each one in again (field_surrogate.py's FNO at 256^2: its
# steps cost more CPU with no message received).
OWN_BLOCKS = r"""
import resource, sys
import numpy as np
from melissa_trainer.stream.heap import recycle_frames
def step():
    block = np.ones(3 << 17)
    del block
step()  # (glibc's dynamic threshold rises to the block at its first free)
if sys.argv[1] == "recycle":
    assert recycle_frames(1 << 18, 70 << 19)  # 256 KiB frames, a buffer of 64 and the queue
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(4):
    step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.e2e
@pytest.mark.timeout(120)
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc only")
def test_recycle_frames_maps_no_block_glibc_kept_on_its_heap() -> None:
    def faults(mode: str) -> int:
        out = subprocess.run(
            [sys.executable, "-c", OWN_BLOCKS, mode], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        return int(out.stdout)

    pages = (3 << 20) // 4096  # one block's
    assert faults("default") < pages // 4  # glibc's own: kept on the heap
    assert faults("recycle") < pages // 4  # (was 4 x pages: mapped at each step)


def test_recycle_frames_leaves_small_frames_and_higher_thresholds_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(heap, "_libc_mallopt", lambda: lambda k, v: calls.append((k, v)) or 1)
    monkeypatch.setattr(heap, "_set", (0, 0))
    assert heap.recycle_frames(heap.FRAME_MIN_BYTES, 1 << 30)  # batched fields: nothing
    assert calls == []
    assert heap.recycle_frames(1 << 20, 100 << 20)
    # mmap, trim: both at once; mmap at glibc's own ceiling, not twice the frame
    # (`test_recycle_frames_maps_no_block_glibc_kept_on_its_heap`)
    assert calls == [(-3, heap.MMAP_THRESHOLD), (-1, 100 << 20)]
    calls.clear()
    assert heap.recycle_frames(1 << 19, 10 << 20)  # lower: the higher ones stand
    assert heap.recycle_frames(1 << 20, 20 << 20)  # (trim: twice mmap at least)
    assert heap.recycle_frames(1 << 20, 100 << 20)
    assert calls == []
    # beyond what glibc takes from its heap: capped, and said so
    assert not heap.recycle_frames(heap.MMAP_THRESHOLD, 4 << 30)
    assert calls == [(-3, heap.MMAP_THRESHOLD), (-1, heap.TRIM_THRESHOLD)]


@pytest.mark.parametrize(
    ("nbytes", "recycle", "expected"),
    [
        (1 << 20, True, [(1 << 20, (8 + 16 + 2) * ((1 << 20) + 4))]),  # frames of their own
        (1 << 16, True, []),  # batched: copied out of their frames
        (1 << 20, False, []),  # ReceiverConfig(recycle_frames=False)
    ],
)
@pytest.mark.timeout(30)
def test_receiver_recycles_frames_once_a_simulation_declares_large_fields(
    nbytes: int, recycle: bool, expected: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    import zmq

    from melissa_trainer import wire as P
    from melissa_trainer.stream import data_path as receiver_module  # (the data path's)
    from melissa_trainer.stream.receiver import Receiver
    from melissa_trainer.stream.receiver_config import ReceiverConfig

    calls: list[tuple[int, int]] = []
    monkeypatch.setattr(
        receiver_module.heap, "recycle_frames", lambda f, p: calls.append((f, p)) or True
    )
    f32 = np.dtype("<f4")
    fields = [P.FieldSpec("u", f32, (nbytes // 4,)), P.FieldSpec("v", f32, (1,))]
    config = ReceiverConfig(expected_simulations=2, rcvhwm=16, recycle_frames=recycle)
    rec = Receiver(FIFOBuffer(8), config=config)
    rec.start()
    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    try:
        assert rec.endpoint is not None
        sock.connect(rec.endpoint)
        sock.send(P.encode_hello(1, 0, 1, fields))
        sock.send(P.encode_hello(1, 0, 1, [P.FieldSpec("w", f32, (1 << 20,))]))  # refused
        deadline = time.monotonic() + 20
        while rec.telemetry()["rejected_hello_mismatch"] < 1:  # both HELLOs ingested
            assert time.monotonic() < deadline, rec.telemetry()
            time.sleep(0.01)
        assert set(calls) == set(expected)  # the first HELLO's, declared (idempotent)
    finally:
        sock.close(linger=0)
        ctx.term()
        rec.stop()


def test_recycle_frames_must_be_a_bool() -> None:
    from melissa_trainer.stream.receiver_config import ReceiverConfig

    with pytest.raises(ValueError, match="recycle_frames must be True or False"):
        ReceiverConfig(recycle_frames="yes")  # type: ignore[arg-type]
