"""How much reuse a sample-to-insert ratio gives, at both ends of the stream's timing
(docs/concepts/buffers.md, "How much reuse a ratio gives"). A read waits for a whole
batch, so the rate limiter frees ``ratio x (batch_size - watermark)`` draws of slack (its
default tolerance's batch term): the draws may trail ``ratio x inserts`` by that much
when the stream's end is seen at once (an in-process source closes the buffer at its last
sample), or run ahead of it by that much when training catches up before the end is seen
(a stream's receiver). A user's trial of 640 samples in batches of 256 measured 9.7
draws per sample in process and 22.1 streamed, against the docs' "about 16"; these are
the two ends. The oracle is arithmetic on N, the batch and the ratio, the draws counted
here, one thread, no timing."""

from __future__ import annotations

import pytest

from melissa_trainer import BufferConfig, make_buffer

RATIO = 16.0


def draws(n: int, batch: int, late_close: bool) -> int:
    """Samples drawn from a default-tolerance reservoir fed `n` samples, reading batches
    of `batch` as `IterableSource` and the trainer do (before each read, insert until a
    put would wait); the buffer is closed right after the last insert (in process) or
    once reads have caught up with the limiter (`late_close`), then drained."""
    buf = make_buffer(
        BufferConfig(
            kind="reservoir",
            capacity=10_000,
            watermark=1,
            sample_to_insert_ratio=RATIO,
            batch_size=batch,
        )  # fmt: skip
    )
    put = drawn = 0
    while True:  # the trainer's order: fill until a put would wait, then one read
        while put < n and buf.try_put({"i": put}):
            put += 1
        if put == n and not late_close:
            break
        try:
            drawn += len(buf.get_batch(batch, timeout=0))
        except TimeoutError:
            # the limiter holds the read back: only more inserts can free it
            assert put == n, "a read and the inserts waited for each other"
            break
    buf.close()
    while batch_read := buf.get_batch(batch):
        drawn += len(batch_read)
    return drawn


@pytest.mark.parametrize(("n", "batch"), [(640, 256), (640, 32), (160, 8)])
def test_the_draws_lie_within_ratio_times_samples_plus_or_minus_a_batch(n: int, batch: int) -> None:
    """In process, about ``ratio x (N - batch)`` draws; streamed, up to ``ratio x (N +
    batch)``; the end-of-stream drain adds at most one draw per sample."""
    early, late = draws(n, batch, False), draws(n, batch, True)
    assert RATIO * (n - batch) - batch <= early <= RATIO * (n - batch) + n
    assert RATIO * (n + batch - 2) - batch <= late <= RATIO * (n + batch) + n
    if n >= 10 * batch:  # the docs: within about 10% of the ratio
        assert early >= 0.9 * RATIO * n and late <= 1.1 * RATIO * n


def test_the_figures_the_docs_quote() -> None:
    """The docs quote these draws per sample for 640 samples (a user's study's size):
    in process and streamed, at batches of 256 and 32, and in process at 512."""
    per_sample = {
        (batch, late): round(draws(640, batch, late) / 640, 2)
        for batch, late in [(256, False), (256, True), (512, False), (32, False), (32, True)]
    }
    assert per_sample == {
        (256, False): 9.67,
        (256, True): 22.0,
        (512, False): 3.3,
        (32, False): 15.26,
        (32, True): 16.76,
    }
