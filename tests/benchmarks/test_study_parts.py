"""benchmarks/study_parts.py (issue 46, eleventh round): `PartsClock`'s split of the
training thread's CPU, against a clock whose readings the test chooses, and the
benchmark end to end in quick mode, its parts adding up to the study's own span (the
`surrogate_cost.StepClock`, an independent clock of the same thread). No rate is
asserted: the figures are for people to read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from benchmark_json import benchmark_module

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


class _Clock:
    """`time` for `parts_clock`: `thread_time` reads the next of `readings`."""

    def __init__(self, readings: list[float]) -> None:
        self.readings = iter(readings)

    def thread_time(self) -> float:
        return next(self.readings)


def test_the_blocks_and_the_reduction_steps_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three steps (global steps 1, 2, 3; a reduction every 2), the stream ending after
    the second. Readings per step: start, batch ready, after backward, end."""
    pc = benchmark_module("parts_clock")
    readings = [0.0, 1.0, 3.0, 6.0,  # step 1: data 1, backward 2, update 3
                10.0, 11.0, 14.0, 24.0,  # between 4; step 2 (reduction): 1, 3, 10
                30.0, 32.0, 33.0, 36.0]  # between 6 (after); step 3: 2, 1, 3  # fmt: skip
    monkeypatch.setattr(pc, "time", _Clock(readings))
    clock = pc.PartsClock(every=2)
    for step in (1, 2, 3):
        state = SimpleNamespace(global_step=step - 1)
        clock.on_step_start(None, state, None)
        clock.on_batch_ready(None, state, None, None)
        clock.on_after_backward(None, state, None, None)
        state.global_step = step  # (the loop counts the step before STEP_END)
        clock.on_step_end(None, state, None)
        if step == 2:
            clock.on_end_of_stream(None, state, None)
    figures: dict[str, Any] = clock.figures()
    assert figures["steps"] == {"stream": 2, "after": 1}
    assert figures["cpu"]["stream"] == {"data": 2.0, "backward": 5.0, "update": 13.0,
                                        "between": 4.0}  # fmt: skip
    assert figures["cpu"]["after"] == {"data": 2.0, "backward": 1.0, "update": 3.0,
                                       "between": 6.0}  # fmt: skip
    assert figures["updates"]["stream"] == {"reduction": [10.0, 1], "other": [3.0, 1]}
    assert figures["updates"]["after"] == {"reduction": [0.0, 0], "other": [3.0, 1]}
    run = {"parts": figures, "sampler_cpu_seconds": 1e-6}
    sp = benchmark_module("study_parts")
    assert sp.reduction(run, "stream") == pytest.approx(7e6)
    assert sp.reduction(run, "after") is None
    assert sp.per_step(run, "stream", "update") == pytest.approx(6.5e6)
    assert sp.sampler_per_streaming_step(run) == pytest.approx(0.5)


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quick_pair_s_parts_add_up_to_the_study_s_span(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """One quick pair through `children` (both studies in one process): each study's
    four blocks over both phases come to its training thread's CPU between its first
    step's start and its last step's end as `StepClock` measured it (within 2%: the
    two hooks' own calls), and the command prints its rows.

    The command's ``--quick`` runs that same pair (the same setup, seed and sampler):
    its `main` is run here with `pair` answering the pair just checked, and asked for
    exactly that pair, rather than a second interpreter training it again; the script's
    own start is checked by its ``--help``."""
    sp = benchmark_module("study_parts")
    active = benchmark_module("active_sampling")
    from dataclasses import replace

    setup = replace(active.Setup(space="wide", steps=200, simulations=10), grid_size=6,
                    time_steps=5, hidden=16, batch_size=8, watermark=8)  # fmt: skip
    on, off = sp.pair(setup, 0, [], tmp_path / "pair", "density")
    for run in (on, off):
        parts = run["parts"]
        assert sum(parts["steps"].values()) == run["steps"] == 200
        total = sum(sum(blocks.values()) for blocks in parts["cpu"].values())
        assert total == pytest.approx(run["span_thread"], rel=0.02)
    assert on["parts"]["updates"]["stream"]["reduction"][1] > 0  # the stream had reductions

    asked: list[tuple[Any, ...]] = []

    def the_pair_checked(*args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        asked.append(args)
        return on, off

    monkeypatch.setattr(sp, "pair", the_pair_checked)
    monkeypatch.setattr(sys, "argv", ["study_parts.py", "--quick", "--json"])
    capsys.readouterr()
    sp.main()
    assert [(a[0], a[1], a[2], a[4]) for a in asked] == [(setup, 0, [], "density")]
    rows = json.loads(capsys.readouterr().out.strip().splitlines()[-1])["rows"]
    cases = [row["case"] for row in rows]
    assert any(c.startswith("stream, data, density on / off") for c in cases)
    assert cases[-1].startswith("the sampler's CPU per streaming step")
    assert all(row["target"] is None and row["unit"] in ("us/step", "us") for row in rows)
    helped = subprocess.run([sys.executable, str(BENCHMARKS / "study_parts.py"), "--help"],
                            capture_output=True, text=True, timeout=120, check=True,
                            cwd=tmp_path).stdout  # fmt: skip
    assert "--quick" in helped
