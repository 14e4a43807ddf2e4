"""benchmarks/step_reference.py's reference workloads and when a study runs them (issue
46, twelfth round): the compute reference counts its CPU and its runs and changes no
operand; `plan` reads a design's reference and refuses a malformed one; the study's
clock runs the reference after the steps its plan names, never after a reduction's
step in the twelfth round's designs."""

from __future__ import annotations

import pytest
import torch
from benchmark_json import benchmark_module


def test_the_compute_reference_counts_its_runs_and_cpu_and_changes_no_operand() -> None:
    ref = benchmark_module("step_reference").ComputeReference(steps=3, products=2)
    a, b = ref.a.clone(), ref.b.clone()
    assert ref.rate == 0.0
    ref.run()
    ref.run()
    assert ref.count == 6 and ref.seconds > 0
    assert ref.rate == pytest.approx(6 / ref.seconds)
    assert torch.equal(ref.a, a) and torch.equal(ref.b, b)
    assert torch.allclose(ref.out, a @ b)  # it computed the product (not a no-op)
    assert ref.a.nbytes + ref.b.nbytes + ref.out.nbytes == 48 * 1024  # the first caches'


def test_plan_reads_a_design_s_reference_and_refuses_a_malformed_one() -> None:
    sr = benchmark_module("step_reference")
    assert sr.plan(None) is None and sr.plan({}) is None
    assert sr.plan({"kind": "compute", "every": 10, "offset": 5}) == ("compute", 10, 5)
    for bad in ({"kind": "disk", "every": 10, "offset": 0},
                {"kind": "step", "every": 0, "offset": 0},
                {"kind": "step", "every": 10, "offset": 10},
                {"kind": "step", "every": 10, "offset": -1}):  # fmt: skip
        with pytest.raises(ValueError, match="every >= 1"):
            sr.plan(bad)
    model = torch.nn.Linear(3, 2)
    assert isinstance(sr.make_reference("step", model, 4), sr.StepReference)
    assert isinstance(sr.make_reference("compute", model, 4), sr.ComputeReference)


class _Counting:
    """A reference that records the study's step after which it ran."""

    def __init__(self, clock: object) -> None:
        self.clock, self.after, self.seconds = clock, [], 0.0

    def run(self) -> None:
        self.after.append(self.clock.steps)  # type: ignore[attr-defined]


@pytest.mark.parametrize("design", ["ref-inproc", "ref5-inproc", "refc-inproc"])
def test_the_clock_runs_the_reference_after_the_steps_its_plan_names(design: str) -> None:
    sc = benchmark_module("surrogate_cost")
    cs = benchmark_module("cost_spread")
    kind, every, offset = benchmark_module("step_reference").plan(cs.DESIGNS[design]["reference"])
    clock = sc.StepClock(sc.SamplerClock(object()))
    clock.every, clock.offset = every, offset
    counting = clock.reference = _Counting(clock)
    for _ in range(100):
        clock.on_step_end(None, None, None)
    assert counting.after == [s for s in range(1, 101) if s % every == offset]
    reductions = {s for s in range(1, 101) if s % 20 == 0}  # the default cadence
    if design == "ref-inproc":  # the ninth round's: every other one right after one
        assert set(counting.after) & reductions == reductions
    else:
        assert not set(counting.after) & reductions and len(counting.after) == 10
