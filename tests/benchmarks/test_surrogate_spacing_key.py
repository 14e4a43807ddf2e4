"""benchmarks/active_sampling.py's key of a surrogate run holds the spacing it resolves
to: every surrogate run recorded before 2026-12-02 named no options and drew with
spacing 0; once the default became 0.1, an unnamed run keyed as they were would have
reused them as runs of the new default (the key did not change with the default)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _bench():  # benchmarks/ is not a package: its modules import each other by name
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import active_sampling
        import active_sampling_keys
    finally:
        sys.path.remove(str(BENCHMARKS))
    return active_sampling, active_sampling_keys


def test_the_spacing_a_surrogate_run_resolves_to_is_in_its_key() -> None:
    bench, keys = _bench()

    def key(**surrogate: float) -> str:
        setup = bench.Setup(space="full", steps=4000, surrogate=surrogate)
        return str(keys.fingerprint(setup, 200, 100, "surrogate"))

    lines = (BENCHMARKS / "results" / "active_sampling_surrogate_full.jsonl").read_text()
    recorded = {json.loads(line)["fingerprint"] for line in lines.splitlines()
                if json.loads(line)["sampler"] == "surrogate"}  # fmt: skip
    assert recorded == {key(spacing=0.0)}  # spacing 0 named: the runs of before
    assert key() == key(spacing=0.1) != key(spacing=0.0)  # the default now: not theirs
