"""The ingest transform: a user's function applied once to each sample as it enters the
buffer, so that the buffer holds its result and a step only gathers (issue 42).

A step's `process_sample` or `process_batch` runs at every draw: a reservoir draws each
sample 10 to 20 times, so features computed there are computed 10 to 20 times. What
depends on the sample alone (normalisation, a flattening, derived inputs) can be computed
once, where the source puts the sample into the buffer, as offline training computes its
features once before its loop. `OnlineTrainer(..., ingest_sample=f)` or
``ingest_block=g`` asks for it; each `Source` applies it where it puts (`Source.
set_ingest_transform`): a receiver to each block a BATCH becomes or each sample, in
whichever thread ingests (its own, or the training thread's pumps); an `IterableSource`
to each item, in the training thread.

Contract for the user's function (docs/concepts/buffers.md, "Features at ingest"):

* A pure function of one sample: the same sample gives the same result, bit for bit,
  whoever calls it and whatever else is in its block. A checkpoint holds the buffer's
  samples as transformed, and a resume does not transform them again; a restarted
  simulation's re-sent steps are dropped as duplicates or transformed again: only a
  pure function makes a resumed run the run that never stopped.
* It runs outside the training step, possibly in the receiver's thread: it must not
  touch the model, nor state that the step changes.
* Its result replaces the sample: the fields it returns are what the buffer stores (their
  shapes and dtypes are the buffer's columns), except ``simulation_id`` and ``time_step``,
  which the trainer keeps (per-simulation losses, the loss guard's report): a field of
  those names the result lacks is carried over from the sample, and one it changes is
  refused. The keys of the stream (which steps were received) are the receiver's, from
  before the transform.
* An exception it raises stops training: `IngestTransformError` names the function and
  the sample(s), and chains the original exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from melissa_trainer.buffers import Sample, SampleBlock

__all__ = [
    "KEPT_FIELDS",
    "BlockTransform",
    "IngestTransform",
    "IngestTransformError",
    "SampleTransform",
]

#: fields that the trainer reads and a transform keeps (carried over when its result
#: lacks them, refused when it changes them)
KEPT_FIELDS = ("simulation_id", "time_step")

SampleTransform = Callable[[Sample], Mapping[str, Any]]
BlockTransform = Callable[[SampleBlock], "Mapping[str, Any] | SampleBlock"]


class IngestTransformError(RuntimeError):
    """The user's ingest transform failed, or returned what a buffer cannot hold; the
    message names the function and the samples, the original exception is `__cause__`."""


class IngestTransform:
    """A user's per-sample (`ingest_sample`) or per-block (`ingest_block`) function,
    applied to whatever a source puts: a sample or a `SampleBlock`.

    Args:
        ingest_sample: sample (field name -> numpy array) -> mapping of field name ->
            array-like: the sample stored.
        ingest_block: `SampleBlock` (the samples along axis 0 of each field) -> mapping
            of field name -> array (or a `SampleBlock`) with the same number of samples
            along axis 0: the samples stored. Each row must depend on its own sample only.

    Exactly one is given. Either form takes either input: a sample is a block of one for
    `ingest_block`; a block's samples go one by one through `ingest_sample` and are
    stacked again (correct, not vectorized: give `ingest_block` to a source that puts
    blocks, a receiver).

    Raises:
        ValueError: neither or both given; TypeError: one is not callable.

    Thread-safety: none of its own; it calls the user's function in the caller's thread.
    """

    def __init__(
        self,
        ingest_sample: SampleTransform | None = None,
        ingest_block: BlockTransform | None = None,
    ) -> None:
        if (ingest_sample is None) == (ingest_block is None):
            raise ValueError(
                "an ingest transform is either per sample (ingest_sample) or per block "
                f"(ingest_block): got {'both' if ingest_sample is not None else 'neither'}"
            )
        arg, fn = (
            ("ingest_sample", ingest_sample)
            if ingest_sample is not None
            else ("ingest_block", ingest_block)
        )
        if not callable(fn):
            raise TypeError(f"{arg} must be callable, got {type(fn).__name__}")
        self._sample_fn, self._block_fn = ingest_sample, ingest_block
        #: how errors name the function: ``ingest_block=make_features``
        self.name = f"{arg}={getattr(fn, '__qualname__', None) or repr(fn)}"

    def __repr__(self) -> str:
        return f"IngestTransform({self.name})"

    # -- what sources call -------------------------------------------------------------

    def many(self, samples: Sequence[Sample]) -> Sequence[Sample]:
        """`samples` as a source puts them (a `SampleBlock` or a list of samples),
        transformed: a block stays a block, a list a list. No sample (a receiver's BATCH
        whose steps were all duplicates): returned as it is, the function not called."""
        if not len(samples):
            return samples
        if isinstance(samples, SampleBlock):
            return self.block(samples)
        return [self.sample(s) for s in samples]

    def sample(self, sample: Sample) -> Sample:
        """One sample, transformed.

        Raises:
            IngestTransformError: the function raised, or returned something else than
                a mapping of arrays, or changed a kept field.
        """
        if self._sample_fn is None:
            one = SampleBlock({k: np.asarray(v)[None] for k, v in sample.items()})
            block = self._call_block(one)
            return {k: v[0, ...] for k, v in block.fields.items()}
        try:
            result = self._sample_fn(sample)
        except Exception as exc:
            raise self._error(f"raised {exc!r}", _where_sample(sample)) from exc
        if not isinstance(result, Mapping):
            raise self._error(
                f"returned {type(result).__name__}, not a mapping of field name -> array",
                _where_sample(sample),
            )
        try:
            out: Sample = {str(k): np.asarray(v) for k, v in result.items()}
        except Exception as exc:
            what = f"returned a field that is not an array ({exc!r})"
            raise self._error(what, _where_sample(sample)) from exc
        self._keep(sample, out, lambda: _where_sample(sample))
        if not out:
            raise self._error("returned no field", _where_sample(sample))
        return out

    def block(self, block: SampleBlock) -> SampleBlock:
        """A block of samples, transformed (same number of samples, in order; an empty
        block as it is).

        Raises:
            IngestTransformError: as `sample`, or the result's fields do not all hold
                ``len(block)`` samples along axis 0.
        """
        if not len(block):  # (nothing to transform: the function is not called)
            return block
        if self._block_fn is not None:
            return self._call_block(block)
        try:
            return SampleBlock.from_samples([self.sample(s) for s in block])
        except ValueError as exc:  # (from_samples: results of different fields or shapes)
            raise self._error(f"gave samples that differ: {exc}", _where_block(block)) from exc

    def dataset(self, samples: Sequence[Sample]) -> list[Sample]:
        """Every sample of `samples` (an `eval_dataset`), transformed, in order."""
        return [self.sample(s) for s in samples]

    # -- helpers -----------------------------------------------------------------------

    def _call_block(self, block: SampleBlock) -> SampleBlock:
        assert self._block_fn is not None
        n = len(block)
        try:
            result = self._block_fn(block)
        except Exception as exc:
            raise self._error(f"raised {exc!r}", _where_block(block)) from exc
        fields = result.fields if isinstance(result, SampleBlock) else result
        if not isinstance(fields, Mapping):
            raise self._error(
                f"returned {type(result).__name__}, not a mapping of field name -> array "
                "(or a SampleBlock)",
                _where_block(block),
            )
        out: dict[str, np.ndarray] = {}
        for key, value in fields.items():
            array = np.asarray(value)
            if array.ndim == 0 or len(array) != n:
                shape = array.shape
                raise self._error(
                    f"returned field {key!r} of shape {shape} for a block of {n} samples: "
                    "each field holds one row per sample, along axis 0",
                    _where_block(block),
                )
            out[str(key)] = array
        self._keep(block.fields, out, lambda: _where_block(block))
        if not out:
            raise self._error("returned no field", _where_block(block))
        return SampleBlock(out)

    def _keep(
        self, given: Mapping[str, Any], out: dict[str, Any], where: Callable[[], str]
    ) -> None:
        """Carry `KEPT_FIELDS` over from `given` into `out`; refuse a change of one."""
        for key in KEPT_FIELDS:
            if key not in given:
                continue
            mine = given[key]
            theirs = out.get(key)
            if theirs is None:
                out[key] = mine
            elif theirs is not mine and not np.array_equal(theirs, mine):
                raise self._error(
                    f"changed field {key!r}, which the trainer reads (per-simulation "
                    "losses, reports): leave it out of the result, or return it unchanged",
                    where(),
                )

    def _error(self, what: str, where: str) -> IngestTransformError:
        return IngestTransformError(f"the ingest transform {self.name} {what}, on {where}")


def _where_sample(sample: Mapping[str, Any]) -> str:
    """Which sample, in words: its simulation and time step when it has them."""
    try:
        if "simulation_id" in sample and "time_step" in sample:
            return (
                f"the sample of simulation {int(sample['simulation_id'])}, time step "
                f"{int(sample['time_step'])}"
            )
    except (TypeError, ValueError):
        pass
    return f"a sample with fields {sorted(sample)}"


def _where_block(block: SampleBlock) -> str:
    """Which samples, in words: their simulations and time steps when they have them."""
    fields = block.fields
    n = len(block)
    try:
        sims = np.unique(np.asarray(fields["simulation_id"]).reshape(-1))
        steps = np.asarray(fields["time_step"]).reshape(-1)
        sim_words = (
            f"simulation {int(sims[0])}" if len(sims) == 1 else f"simulations {sims.tolist()[:8]}"
        )
        span = f"time steps {int(steps.min())}..{int(steps.max())}"
        return f"a block of {n} samples ({sim_words}, {span})"
    except (KeyError, TypeError, ValueError):
        return f"a block of {n} samples with fields {sorted(fields)}"
