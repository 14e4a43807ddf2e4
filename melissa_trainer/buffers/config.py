"""`BufferConfig`: what `make_buffer` builds, and the one place its rules are checked.

`TrainingArguments.buffer_config()` builds one; `TrainingArguments` reports the same
rules (`config_problems`) under its own field names (``buffer``, ``buffer_size``, ...),
so a rule and its message exist once. The buffer constructors keep only the invariants
a direct caller needs (`size_problem`, shared with the rules here).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from melissa_trainer.common.checks import count_problem

__all__ = [
    "BUFFER_KINDS",
    "DEFAULT_BUFFER",
    "DEFAULT_BUFFER_SIZE",
    "DEFAULT_SAMPLE_TO_INSERT_RATIO",
    "DEFAULT_WATERMARK",
    "MAX_CHOICES",
    "BufferConfig",
    "config_problems",
    "resolve_sample_to_insert_ratio",
    "size_problem",
]

#: buffer kinds `make_buffer` builds (lower case).
BUFFER_KINDS = ("fifo", "firo", "reservoir")

# The defaults of a run, here once: `TrainingArguments` and `BufferConfig` use them.
# Chosen on measurements (benchmarks/defaults.py, docs/concepts/buffers.md): with the
# previous ones (FIFO, every sample trained on once) a study of 20 short simulations
# trained 25 steps to a model hardly better than the mean field.
#: the buffer policy
DEFAULT_BUFFER = "reservoir"
#: samples held per rank
DEFAULT_BUFFER_SIZE = 10_000
#: samples held before training starts
DEFAULT_WATERMARK = 1
#: samples drawn per sample inserted that `TrainingArguments` gives a reservoir when
#: its `sample_to_insert_ratio` is unset (see `resolve_sample_to_insert_ratio`)
DEFAULT_SAMPLE_TO_INSERT_RATIO = 16.0
#: the most candidates a reservoir's draw or eviction may look at: each read draws
#: ``batch * choices`` uniforms at once, and 4 already does most of what more do
#: (docs/when-online-pays.md)
MAX_CHOICES = 1024
_RESERVOIR_ONLY = ("max_sample_reuse", "sample_to_insert_ratio", "sample_to_insert_tolerance")


@dataclass(frozen=True)
class BufferConfig:
    """The configuration of one buffer, validated on construction.

    Attributes:
        kind: ``"fifo"``, ``"firo"`` or ``"reservoir"`` (case-insensitive, stored lower
            case).
        capacity: maximum number of samples held (>= 1).
        watermark: the fewest samples held for a read to be served (every read, until
            close), in [1, `capacity`].
        seed: seed of the buffer's random generator (>= 0).
        max_sample_reuse: reservoir only: draws after which a sample leaves (>= 1, and
            >= `sample_to_insert_ratio`); None: unbounded.
        sample_to_insert_ratio: reservoir only: target draws per inserted sample (> 0);
            None: no rate limiter. (Here it is explicit; `TrainingArguments` resolves its
            own unset ratio with `resolve_sample_to_insert_ratio`.)
        sample_to_insert_tolerance: with a ratio: how far, in samples drawn, reads may
            run ahead of ``ratio * inserts`` (>= ``ratio + batch_size``); None: the
            default, see `resolved_tolerance`.
        batch_size: the largest read, in samples (>= 1, <= `capacity`).
        batches_per_step: reads per optimizer step (gradient accumulation, >= 1); only
            the default tolerance uses it.
        retain: FIFO/FIRO: keep served samples for `Buffer.rewind` (pseudo-epochs;
            memory grows with the data served).
        draw_choices: reservoir only: each draw takes the least-drawn of this many
            uniformly random held samples (>= 1; 1: uniform draws). See `ReservoirBuffer`.
        evict_choices: reservoir only: each eviction takes the most-drawn of this many
            uniformly random drawn samples (>= 1; 1: a uniformly random drawn one).

    Raises:
        ValueError: every problem found, one per line, each naming the field and the fix.
    """

    kind: str = DEFAULT_BUFFER
    capacity: int = DEFAULT_BUFFER_SIZE
    watermark: int = DEFAULT_WATERMARK
    seed: int = 0
    max_sample_reuse: int | None = None
    sample_to_insert_ratio: float | None = None
    sample_to_insert_tolerance: float | None = None
    batch_size: int = 1
    batches_per_step: int = 1
    retain: bool = False
    draw_choices: int = 1
    evict_choices: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.kind, str):
            object.__setattr__(self, "kind", self.kind.strip().lower())
        problems = config_problems(asdict(self))
        if problems:
            lines = "\n".join(f"  - {p}" for p in problems)
            raise ValueError(f"invalid BufferConfig ({len(problems)} problems):\n{lines}")

    @property
    def resolved_tolerance(self) -> float | None:
        """The rate limiter's tolerance: the given one, the default, or None without a
        ratio.

        The default is ``max(4 * batch_size * batches_per_step, ratio * watermark +
        batch_size, ratio * (batch_size - watermark))`` samples:

        * ``>= ratio + batch_size`` always (watermark >= 1): the liveness bound of
          `RateLimiter`, below which a waiting read and a waiting insert can wait for
          each other forever;
        * ``ratio * watermark + batch_size``: the samples held at the watermark may be
          drawn `ratio` times each as soon as training starts, instead of training
          waiting for one more insert per ``ratio`` draws from the first batch on;
        * ``ratio * (batch_size - watermark)``: with a watermark below the batch, the
          first read needs `batch_size` samples, and the limiter must let that many in
          before any is drawn (it frees the first `watermark` inserts only); below it,
          the reader and the stream wait for each other forever;
        * ``4 * batch_size * batches_per_step``: a few optimizer steps of slack, so the
          limiter holds training back only when it runs steps ahead of the stream,
          not at every batch of jitter.

        It depends on the batch, not on `capacity`: a tolerance of ``ratio + capacity``
        (the old default of `make_buffer`, which did not know the batch size) lets a
        large reservoir run a whole buffer's worth of draws off the ratio, i.e. no rate
        limit at all for the first ``capacity / ratio`` inserts.
        """
        ratio = self.sample_to_insert_ratio
        if ratio is None:
            return None
        if self.sample_to_insert_tolerance is not None:
            return float(self.sample_to_insert_tolerance)
        return float(
            max(
                4 * self.batch_size * self.batches_per_step,
                ratio * self.watermark + self.batch_size,
                ratio * (self.batch_size - self.watermark),
            )
        )


def resolve_sample_to_insert_ratio(
    kind: str, ratio: float | None, max_sample_reuse: int | None = None
) -> float | None:
    """The ratio a run's buffer gets from `TrainingArguments.sample_to_insert_ratio`.

    None (unset) gives a reservoir `DEFAULT_SAMPLE_TO_INSERT_RATIO` (capped at
    `max_sample_reuse`, which a ratio may not exceed) and FIFO / FIRO none; 0 means no
    rate limit (a reservoir then draws as fast as training runs); any other value is
    returned as it is (`config_problems` judges it). `kind` is compared lower case.
    """
    if ratio is None:
        if str(kind).strip().lower() != "reservoir":
            return None
        if isinstance(max_sample_reuse, int) and max_sample_reuse >= 1:
            return min(DEFAULT_SAMPLE_TO_INSERT_RATIO, float(max_sample_reuse))
        return DEFAULT_SAMPLE_TO_INSERT_RATIO
    if isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and ratio == 0:
        return None
    return ratio


def choices_problem(name: str, value: int) -> list[str]:
    """The problem with `value` (a count) as a reservoir's `name` (``draw_choices``,
    ``evict_choices``) beyond `MAX_CHOICES`, as a one-line list, or an empty one."""
    if value <= MAX_CHOICES:
        return []
    return [
        f"{name}={value!r} is above {MAX_CHOICES}: each draw or eviction looks at that "
        f"many samples (time and memory grow with it; 4 already spreads the draws): set "
        f"{name} <= {MAX_CHOICES}"
    ]


def size_problem(
    capacity: int, watermark: int, names: Mapping[str, str] | None = None
) -> str | None:
    """The problem with a watermark above the capacity (both >= 1), or None."""
    names = names or {}
    cap, mark = names.get("capacity", "capacity"), names.get("watermark", "watermark")
    if watermark > capacity:
        return f"{mark}={watermark} is larger than {cap}={capacity}: lower {mark} or raise {cap}"
    return None


def config_problems(
    values: Mapping[str, Any],
    names: Mapping[str, str] | None = None,
    skip: Collection[str] = (),
) -> list[str]:
    """Every problem of a buffer configuration, one line each (empty if valid).

    Args:
        values: `BufferConfig` field name -> value (every field).
        names: `BufferConfig` field name -> the name to show (e.g. ``"buffer_size"``
            for ``"capacity"`` when `TrainingArguments` asks); default: the field names.
        skip: fields already reported as malformed by the caller: no rule reads them.
    """
    names = dict(names or {})
    n = {key: names.get(key, key) for key in values}
    p: list[str] = []

    def ok(*keys: str) -> bool:
        return not any(k in skip for k in keys)

    def count_ok(key: str, minimum: int = 1, optional_meaning: str | None = None) -> bool:
        value = values[key]
        if not ok(key) or (value is None and optional_meaning is not None):
            return False
        problem = count_problem(n[key], value, minimum, optional_meaning)
        if problem is not None:
            p.append(problem)
        return problem is None

    kind = values["kind"]
    kind_ok = ok("kind") and kind in BUFFER_KINDS
    if ok("kind") and not kind_ok:
        p.append(f"{n['kind']}={kind!r} is not supported: choose one of {', '.join(BUFFER_KINDS)}")
    sizes = [count_ok(key) for key in ("capacity", "watermark", "batch_size")]
    count_ok("batches_per_step")
    count_ok("seed", minimum=0)
    for key in ("draw_choices", "evict_choices"):
        if key in values and count_ok(key):
            p.extend(choices_problem(n[key], values[key]) or ())
    reuse_ok = count_ok("max_sample_reuse", optional_meaning="allow unbounded reuse")
    capacity = values["capacity"]
    if sizes[0] and sizes[1]:
        problem = size_problem(capacity, values["watermark"], n)
        if problem is not None:
            p.append(problem)
    if sizes[0] and sizes[2] and values["batch_size"] > capacity:
        p.append(
            f"{n['batch_size']}={values['batch_size']} is larger than {n['capacity']}="
            f"{capacity} (a batch could never be read while streaming): lower "
            f"{n['batch_size']} or raise {n['capacity']}"
        )

    if kind_ok and kind != "reservoir":
        for key in ("draw_choices", "evict_choices"):
            if ok(key) and values.get(key, 1) != 1:
                p.append(
                    f"{n[key]}={values[key]!r} only applies to {n['kind']}='reservoir' "
                    f"({n['kind']}={kind!r}; FIFO and FIRO serve each sample exactly once): "
                    f"set {n['kind']}='reservoir', or {n[key]}=1"
                )
        for key in _RESERVOIR_ONLY:
            if ok(key) and values[key] is not None:
                p.append(
                    f"{n[key]}={values[key]!r} only applies to {n['kind']}='reservoir' "
                    f"({n['kind']}={kind!r}; FIFO and FIRO serve each sample exactly once): "
                    f"set {n['kind']}='reservoir', or unset {n[key]}: {n[key]}=None (on a "
                    f"command line: --{n[key]} None)"
                )
        return p
    ratio = values["sample_to_insert_ratio"]
    ratio_ok = False
    if ok("sample_to_insert_ratio") and ratio is not None:
        ratio_ok = isinstance(ratio, (int, float)) and math.isfinite(ratio) and ratio > 0
        if not ratio_ok:
            p.append(
                f"{n['sample_to_insert_ratio']}={ratio!r} must be > 0: give a positive "
                "ratio (e.g. 1.0), or leave it unset (None) to disable the rate limit"
            )
    reuse = values["max_sample_reuse"]
    if ratio_ok and reuse_ok and reuse is not None and ratio > reuse:
        p.append(
            f"{n['sample_to_insert_ratio']}={ratio!r} is larger than "
            f"{n['max_sample_reuse']}={reuse} (samples would leave the buffer before the "
            f"ratio is met): lower {n['sample_to_insert_ratio']} or raise "
            f"{n['max_sample_reuse']}"
        )
    tolerance = values["sample_to_insert_tolerance"]
    if not ok("sample_to_insert_tolerance") or tolerance is None:
        return p
    if ok("sample_to_insert_ratio") and ratio is None:
        p.append(
            f"{n['sample_to_insert_tolerance']}={tolerance!r} has no effect without "
            f"{n['sample_to_insert_ratio']}: set {n['sample_to_insert_ratio']} or remove "
            f"{n['sample_to_insert_tolerance']}"
        )
    elif ratio_ok and sizes[2]:
        batch, mark = values["batch_size"], values["watermark"]
        # the first read: `batch` inserts before any draw, the first `watermark` free
        first = ratio * (batch - mark) if sizes[1] else 0.0
        minimum = max(ratio + batch, first)
        if not (
            isinstance(tolerance, (int, float))
            and math.isfinite(tolerance)
            and tolerance >= minimum
        ):
            p.append(
                f"{n['sample_to_insert_tolerance']}={tolerance!r} is too small for "
                f"{n['sample_to_insert_ratio']}={ratio!r} and {n['batch_size']}="
                f"{values['batch_size']} (training would stall): set it >= max(ratio + "
                f"{n['batch_size']}, ratio * ({n['batch_size']} - {n['watermark']})) = "
                f"{minimum:g}, raise {n['watermark']}, or leave it unset (None) for the default"
            )
    return p
