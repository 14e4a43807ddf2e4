"""The heat_guess example's report in words and figures: the study's second half
(`second_half`), its mean work per time step (`work_per_step`), the surrogate's work
against the baseline's (`work_words`) and the serving counters as a sentence
(`serving_sentence`). train.py prints them; benchmarks/closed_loop.py reads the figures."""

from __future__ import annotations

import math
from typing import Any

import numpy as np


def second_half(simulations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The simulations of the study's second half (by id: the launch order)."""
    return simulations[len(simulations) // 2 :]


def work_per_step(simulations: list[dict[str, Any]]) -> float:
    """Mean products by A per time step over `simulations`."""
    products = [p for s in simulations for p in s["products"]]
    return float(np.mean(products)) if products else float("nan")


def work_words(ours: float, base: float) -> str:
    """The surrogate's work against the baseline's in words: ``"2.91x less work"`` when
    the guesses saved work, ``"1.09x more work"`` when they cost some (a user's trial of
    ``--method cg`` read "0.92x less work" for more), ``"the same work"`` at 1.00x, and
    ``"no ratio: ..."`` when either figure is not a positive number (a NaN printed "nanx more
    work"; no products recorded, a mean of nothing, is one)."""
    if not all(math.isfinite(x) and x > 0 for x in (ours, base)):
        return "no ratio: a figure is not a positive number"
    if f"{base / ours:.2f}" == "1.00":
        return "the same work"
    if base > ours:
        return f"{base / ours:.2f}x less work"
    return f"{ours / base:.2f}x more work"


def serving_sentence(telemetry: dict[str, float]) -> str:
    """`ServingHook.telemetry()` as a sentence: the requests answered, in how many
    batches and what share of training time, the latency's median and 99th percentile
    (in training steps and ms), and the requests not answered by reason (refused,
    rejected, expired), the zero counters left out. (``--json`` keeps the counters.)"""
    t = telemetry
    requests, answered = int(t.get("requests", 0)), int(t.get("answered", 0))
    if requests == 0:
        return "no requests (the simulations never asked)"
    said = (
        f"{answered} of {requests} requests answered, in {int(t.get('batches', 0))} "
        f"batches taking {t.get('serving_share', 0.0):.1%} of training time"
    )
    if "latency_steps_p50" in t:
        said += (
            f"; latency median {_steps(t['latency_steps_p50'])} "
            f"({t['latency_ms_p50']:.0f} ms), 99th percentile "
            f"{_steps(t['latency_steps_p99'])} ({t['latency_ms_p99']:.0f} ms)"
        )
    missed = []
    for kind in ("refused", "rejected"):
        reasons = {k[len(kind) + 1 :]: int(v) for k, v in t.items() if k.startswith(f"{kind}_")}
        if any(reasons.values()):
            detail = ", ".join(f"{r} {n}" for r, n in sorted(reasons.items()) if n)
            missed.append(f"{sum(reasons.values())} {kind} ({detail})")
    if t.get("expired"):
        missed.append(f"{int(t['expired'])} expired before an answer")
    if missed:
        said += "; not answered: " + ", ".join(missed)
    return said


def _steps(count: float) -> str:
    """``"1 step"``, ``"8 steps"``: a latency in training steps (a percentile, rounded)."""
    return f"{count:.0f} step" + ("" if round(count) == 1 else "s")
