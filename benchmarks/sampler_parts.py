"""The density sampler's CPU per study (issue 46, the acquisition's cost), this
checkout's code against a baseline package's, on the same replayed studies.

A replayed study: `surrogate_cost.py`'s sampler (`active_sampling.py`'s wide space, 12
parameters, `DensitySampler`'s defaults), planned for 48 draws (its design's
optimisation, before the first step in a study, is not counted); before each draw,
every simulation drawn so far observed with its loss (drifting with the draw's
number: a study's relative losses change between draws), as a study's reservoir,
holding every simulation, reports them. Timed with the thread's CPU clock: the 48
draws together, the observations together (the replay's own losses computed outside
the clock: until issue 46's ninth round they were counted in the observations'). Each
code runs in its own interpreter (the baseline's package first on ``PYTHONPATH``), in
alternating order (ours, baseline; baseline, ours; ...), several studies (seeds) each;
figures: medians over the studies.
The draws of both codes are compared (their ``float.hex``): a difference stops the run.

    git archive <commit> melissa_trainer | tar -x -C /tmp/base
    python benchmarks/sampler_parts.py --baseline /tmp/base --json
    python benchmarks/sampler_parts.py --quick    # tiny: checks, no figure
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PARTS = ("draw", "observe")


def loss_of(parameters: dict[str, float], age: int, loss: str = "contrast") -> float:
    """Drifting with `age`. "contrast": high where the diffusivity is high, with a wall
    contrast that dominates it (no parameter's rank correlation reaches the `evidence`:
    the draws are the design's, their warp never computed); "diffusivity": the
    diffusivity dominates (its parameter is warped, the contrast's `sharpen` works)."""
    values = list(parameters.values())
    if loss == "diffusivity":
        hard = math.exp(parameters["log2_alpha"]) * (1.0 + 0.002 * abs(values[0] - values[1]))
    else:
        hard = math.exp(parameters["log2_alpha"]) + 0.01 * abs(values[0] - values[1])
    return hard * (1.0 + 0.01 * age)


def replay(seed: int, draws: int, loss: str = "contrast") -> dict[str, Any]:
    """One replayed study (module docstring): CPU-seconds of its draws and of its
    observations, and the SHA-256 of its draws' ``float.hex``."""
    sys.path.insert(0, str(HERE))
    import active_sampling as bench

    setup = bench.Setup(space="wide", simulations=draws)
    sampler = bench.make_arm(setup, "density", seed)
    sampler.plan(draws)
    sampler.prepare()  # (the Launcher's start: the design, off the draws' clock)
    clock = time.thread_time
    drawn: list[dict[str, float]] = []
    spent = dict.fromkeys(PARTS, 0.0)
    bent = 0  # draws with a parameter warped by the losses
    for i in range(draws):
        losses = [loss_of(parameters, i, loss) for parameters in drawn]  # (the study's, not timed)
        start = clock()
        for sid, (parameters, value) in enumerate(zip(drawn, losses, strict=True)):
            sampler.observe(sid, parameters, value)
        middle = clock()
        drawn.append(sampler.draw())
        spent["observe"] += middle - start
        spent["draw"] += clock() - middle
        bent += any(h is not None for h in sampler._hard)  # a parameter warped
    hexes = json.dumps([[float(v).hex() for v in p.values()] for p in drawn])
    return {**spent, "bent": bent, "digest": hashlib.sha256(hexes.encode()).hexdigest(),
            "module": sys.modules[type(sampler).__module__].__file__}  # fmt: skip


def child(
    package_parent: Path | None, seeds: list[int], draws: int, loss: str
) -> list[dict[str, Any]]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if package_parent is not None:  # the baseline's package before this checkout's
        env["PYTHONPATH"] = os.pathsep.join([str(package_parent), env.get("PYTHONPATH", "")])
    spec = json.dumps({"seeds": seeds, "draws": draws, "loss": loss})
    out = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True,
                         text=True, env=env, check=False, cwd=ROOT)  # fmt: skip
    if out.returncode != 0:
        raise SystemExit(f"a replay failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
    runs: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--baseline", type=Path, default=None,
                   help="the folder holding the baseline's melissa_trainer (default: this "
                        "checkout's own)")  # fmt: skip
    p.add_argument("--rounds", type=int, default=6, help="rounds of both codes (default 6)")
    p.add_argument("--studies", type=int, default=3, help="replayed studies a code per round")
    p.add_argument("--draws", type=int, default=48)
    p.add_argument("--loss", choices=("contrast", "diffusivity"), default="contrast",
                   help="the replayed losses (`loss_of`; default contrast: no parameter "
                        "warped, as until issue 46's ninth round)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="tiny: checks the pipeline, no figure")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", help=argparse.SUPPRESS)
    opts = p.parse_args()
    if opts.child:
        spec = json.loads(opts.child)
        print(json.dumps([replay(seed, spec["draws"], spec["loss"]) for seed in spec["seeds"]]))
        return
    rounds, studies, draws = (1, 1, 12) if opts.quick else (opts.rounds, opts.studies, opts.draws)
    baseline = opts.baseline.resolve() if opts.baseline else None
    print(f"{rounds} round(s) of {studies} replayed studies of {draws} draws per code, "
          f"alternate orders; baseline {baseline or 'this checkout'} (the machine may be "
          "busy: both codes alike)")  # fmt: skip
    spent: dict[str, dict[str, list[float]]] = {
        code: {part: [] for part in (*PARTS, "total")} for code in ("ours", "baseline")
    }
    for r in range(rounds):
        seeds = list(range(r * studies, (r + 1) * studies))
        order = ["ours", "baseline"] if r % 2 == 0 else ["baseline", "ours"]
        got = {code: child(None if code == "ours" else baseline, seeds, draws, opts.loss)
               for code in order}  # fmt: skip
        for a, b in zip(got["ours"], got["baseline"], strict=True):
            if a["digest"] != b["digest"]:
                raise SystemExit(f"round {r}: the codes' draws differ ({a['module']} against "
                                 f"{b['module']})")  # fmt: skip
        for code, runs in got.items():
            for run in runs:
                for part in PARTS:
                    spent[code][part].append(run[part] * 1e3)
                spent[code]["total"].append((run["draw"] + run["observe"]) * 1e3)
        print(f"round {r} ({', '.join(order)}): "
              + "; ".join(f"{code} draws {statistics.median(x['draw'][-studies:]):.1f} ms, "
                          f"observations {statistics.median(x['observe'][-studies:]):.1f} ms"
                          for code, x in spent.items())
              + f" (draws with a parameter warped: {[run['bent'] for run in got['ours']]}; "
              f"modules {got['ours'][0]['module']} / {got['baseline'][0]['module']})",
              flush=True)  # fmt: skip
    rows = []
    for part in (*PARTS, "total"):
        ours, base = (
            statistics.median(spent["ours"][part]),
            statistics.median(spent["baseline"][part]),
        )
        what = {"draw": f"its {draws} draws ({opts.loss} losses)", "observe": "its observations",
                "total": "draws and observations"}[part]  # fmt: skip
        rows.append({"case": f"density sampler, {what}, CPU per replayed study (median of "
                             f"{len(spent['ours'][part])})",
                     "ours": round(ours, 2), "baseline": round(base, 2), "unit": "ms",
                     "ratio": round(base / ours, 3) if ours > 0 else None,
                     "target": None})  # fmt: skip
    sys.path.insert(0, str(HERE))
    from report import print_rows

    print_rows(rows, "the density sampler's CPU per study", width=70)
    if opts.json:
        from melissa_trainer.common.json_output import to_json

        print(to_json({"rows": rows}))


if __name__ == "__main__":
    main()
