"""Does an adaptive sampler cut the worst held-out case of a user's own problem? An A/B
against plain ``"lhs"`` on a 1-D Burgers study of 3 parameters (a user trial's, issue
F1 of trial 7), the counter-example to the heat benchmark's walls space.

The problem: a toy viscous Burgers solver, ``u_t + (u^2/2)_x = nu u_xx`` on a periodic
[0, 1), 64 points, 40 output steps of 0.01, ``u0 = A sin(2 pi x) + 0.3 A cos(4 pi x +
phi)``; parameters ``nu`` in [0.003, 0.05] (sampled uniformly; small ``nu``: steep
fronts, the high-loss region), ``A`` in [0.5, 1.5], ``phi`` in [0, 2 pi]. Each arm is a
real study: the `Launcher` runs `--n_sims` solver processes (this file with
``--solver``), ``job_limit`` 2, a `Study` streams them into an `OnlineTrainer` (an MLP
of (log nu, A - 1, sin phi, cos phi, t) -> u, 2 hidden layers of 128, Adam 1e-3, the
library's other defaults) that trains until the stream ends. The training loss is the
absolute MSE (or, with ``--relative_loss``, each sample's squared error over its
squared norm: the judged metric, hence the sampler's signal).

Judged: each of 60 held-out simulations' relative L2 error (the same test set for every
run: ``nu`` log-uniform, ``A`` and ``phi`` uniform, numpy seed 1234): mean, p90, max
(the worst case). Per seed, the arms share the model's initial weights and run one
after the other in alternating order (lhs first on even seeds); each arm in its own
process. Rows: per arm other than lhs and per statistic, the arm's median over the
seeds (ours), lhs's (baseline) and the median of the per-seed ratios lhs / arm (ratio:
above 1, the arm errs less; target 1.0: at least as good as lhs). With ``--json``, the
line also holds ``per_seed`` (each row's ratios) and ``share_low_nu`` (per arm, each
seed's share of draws with ``nu`` < 0.006).

    python benchmarks/sampler_worst_case_burgers.py --seeds 100 101 102 103 104 105
    python benchmarks/sampler_worst_case_burgers.py --arms lhs surrogate \\
        "surrogate:exploration=0.8" breed --json
    python benchmarks/sampler_worst_case_burgers.py --quick      # 1 seed, 8 simulations

Arms: a `make_sampler` name, optionally with ``:key=value,...`` options (numbers; an
integer stays an int). An arm whose sampler cannot be built is refused, with the
sampler's message, before any study runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from melissa_trainer.common.json_output import to_json

sys.path.insert(0, str(Path(__file__).resolve().parent))
from report import add_flags, finish  # noqa: E402

N, STEPS, DT = 64, 40, 0.01
X = np.arange(N) / N
BOUNDS = {"nu": (0.003, 0.05), "A": (0.5, 1.5), "phi": (0.0, 2 * np.pi)}
LOW_NU = 0.006  # below it: the steep-front (high absolute loss) region


def solve(nu: float, A: float, phi: float) -> np.ndarray:
    """The trajectory, (STEPS, N) float32: Rusanov advection in 4 substeps, then
    backward-Euler diffusion by Jacobi iterations (the trial's solver, unchanged)."""
    u = A * np.sin(2 * np.pi * X) + 0.3 * A * np.cos(4 * np.pi * X + phi)
    out = []
    r = nu * DT * N**2
    for _ in range(STEPS):
        rhs = u.copy()
        for _ in range(4):
            f = 0.5 * rhs**2
            a = np.maximum(np.abs(rhs), np.abs(np.roll(rhs, -1)))
            flux = 0.5 * (f + np.roll(f, -1)) - 0.5 * a * (np.roll(rhs, -1) - rhs)
            rhs = rhs - DT / 4 * N * (flux - np.roll(flux, 1))
        v = rhs.copy()
        for _ in range(5000):
            new = (rhs + r * (np.roll(v, 1) + np.roll(v, -1))) / (1 + 2 * r)
            done = np.max(np.abs(new - v)) < 1e-8
            v = new
            if done:
                break
        u = v
        out.append(u.astype(np.float32))
    return np.stack(out)


def features(nu: float, A: float, phi: float, tfrac: float) -> list[float]:
    lognu = (np.log(nu) - np.log(0.003)) / (np.log(0.05) - np.log(0.003))
    return [float(lognu), A - 1.0, float(np.sin(phi)), float(np.cos(phi)), tfrac]


def run_solver() -> None:
    """The launcher's simulation: read the parameters, send each step's field."""
    from melissa_trainer.client import Client

    with Client(fields={"u": ((N,), "float32")}) as client:
        p = client.parameters
        for t, u in enumerate(solve(float(p["nu"]), float(p["A"]), float(p["phi"]))):
            client.send(t, u=u)


def parse_arm(spec: str) -> tuple[str, dict[str, float]]:
    """``"surrogate:exploration=0.8,kappa=0"`` -> ("surrogate", {...}); a clear error
    naming the arm otherwise. An integer (``min_observations=4``) stays an int: the
    samplers' counts refuse 4.0."""
    name, _, rest = spec.partition(":")
    options: dict[str, float] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        try:
            options[key] = int(value) if value.strip().lstrip("+-").isdigit() else float(value)
        except ValueError:
            raise SystemExit(f"arm {spec!r}: options are key=number, got {item!r}") from None
        if not eq:
            raise SystemExit(f"arm {spec!r}: options are key=number, got {item!r}")
    return name, options


def check_arm(spec: str) -> None:
    """Refuse an arm whose sampler cannot be built (an unknown kind, a misspelt option, a
    value out of range), with the sampler's own message naming the option and the fix,
    before any study runs (its child would refuse it after the arms before it ran)."""
    from melissa_trainer.launcher import make_sampler

    name, options = parse_arm(spec)
    try:
        make_sampler(name, BOUNDS, seed=0, **options)
    except (TypeError, ValueError) as error:
        raise SystemExit(f"arm {spec!r}: {error}") from None


def run_arm(spec: str, seed: int, n_sims: int, relative: bool, out: str) -> dict[str, Any]:
    """One study (in this process): the held-out errors and the draws' low-nu share."""
    import torch

    from melissa_trainer import (
        Launcher,
        OnlineTrainer,
        ReceiverConfig,
        StreamSource,
        Study,
        TrainingArguments,
        make_sampler,
    )

    name, options = parse_arm(spec)
    torch.manual_seed(seed)
    sampler = make_sampler(name, BOUNDS, seed=seed, **options)
    drawn: list[float] = []
    draw = sampler.draw

    def recording_draw() -> dict[str, float]:
        values = draw()
        drawn.append(values["nu"])
        return values

    sampler.draw = recording_draw  # type: ignore[method-assign]
    launcher = Launcher(
        [sys.executable, str(Path(__file__).resolve()), "--solver"],
        sampler,
        n_simulations=n_sims,
        job_limit=2,
    )
    source = Study(launcher, StreamSource(ReceiverConfig(fields={"u": ((N,), "float32")})))
    model = torch.nn.Sequential(
        torch.nn.Linear(5, 128), torch.nn.GELU(), torch.nn.Linear(128, 128), torch.nn.GELU(),
        torch.nn.Linear(128, N),
    )  # fmt: skip

    def process_sample(s: dict[str, Any]) -> tuple[Any, Any]:
        nu, A, phi = (float(v) for v in s["parameters"])
        x = torch.tensor(features(nu, A, phi, (s["time_step"] + 1) / STEPS), dtype=torch.float32)
        return x, torch.from_numpy(np.asarray(s["u"], np.float32).copy())

    class RelativeLoss(OnlineTrainer):
        """Each sample's loss: its squared error over its squared norm (the judged metric)."""

        def compute_sample_losses(self, model: Any, batch: Any) -> Any:
            inputs, targets = batch
            sq = ((model(inputs) - targets) ** 2).sum(dim=1)
            return sq / (targets**2).sum(dim=1).clamp_min(1e-8)

    args = TrainingArguments(output_dir=out, seed=seed, disable_progress_bar=True)
    cls = RelativeLoss if relative else OnlineTrainer
    trainer = cls(
        model, args, torch.optim.Adam(model.parameters(), 1e-3),
        train_source=source, process_sample=process_sample,
    )  # fmt: skip
    trainer.train()
    rng = np.random.default_rng(1234)
    errs = []
    model.eval()
    for _ in range(60):
        nu = float(np.exp(rng.uniform(np.log(0.003), np.log(0.05))))
        A, phi = float(rng.uniform(0.5, 1.5)), float(rng.uniform(0, 2 * np.pi))
        truth = solve(nu, A, phi)
        xs = torch.tensor(
            [features(nu, A, phi, (t + 1) / STEPS) for t in range(STEPS)], dtype=torch.float32
        )
        with torch.no_grad():
            pred = model(xs).numpy()
        errs.append(float(np.linalg.norm(pred - truth) / np.linalg.norm(truth)))
    e = np.array(errs)
    return {
        "arm": spec, "seed": seed, "n_sims": n_sims, "relative_loss": relative,
        "mean": float(e.mean()), "p90": float(np.quantile(e, 0.9)), "max": float(e.max()),
        "share_low_nu": float(np.mean(np.array(drawn) < LOW_NU)) if drawn else None,
    }  # fmt: skip


def child(spec: str, seed: int, n_sims: int, relative: bool) -> dict[str, Any]:
    """`run_arm` in its own process (a fresh torch and launcher per study)."""
    with tempfile.TemporaryDirectory(prefix="sampler_burgers_") as tmp:
        cmd = [sys.executable, __file__, "--child", spec, "--seeds", str(seed),
               "--n_sims", str(n_sims), "--out", tmp]  # fmt: skip
        if relative:
            cmd.append("--relative_loss")
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise SystemExit(f"arm {spec} seed {seed} failed ({proc.returncode}):\n"
                             f"{proc.stderr[-3000:]}")  # fmt: skip
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--arms", nargs="+", default=["lhs", "surrogate"],
                   help="the first is the baseline (default: lhs surrogate)")  # fmt: skip
    p.add_argument("--seeds", nargs="+", type=int, default=[100, 101, 102, 103, 104, 105])
    p.add_argument("--n_sims", type=int, default=40)
    p.add_argument("--relative_loss", action="store_true",
                   help="train (and steer) on the judged metric, the relative error")  # fmt: skip
    p.add_argument("--results", help="append each run's JSON line to this file")
    p.add_argument("--solver", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    add_flags(p, quick="1 seed, 8 simulations: checks the pipeline, no figures")
    opts = p.parse_args()
    if opts.solver:
        return run_solver()
    if opts.child:
        run = run_arm(opts.child, opts.seeds[0], opts.n_sims, opts.relative_loss, opts.out)
        print(to_json(run))
        return None
    if opts.quick:
        opts.seeds, opts.n_sims = opts.seeds[:1], 8
    for spec in opts.arms:
        check_arm(spec)  # refuse a bad arm before any study runs
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for i, seed in enumerate(opts.seeds):
        order = opts.arms if i % 2 == 0 else opts.arms[::-1]  # interleaved: drift cancels
        for spec in order:
            run = child(spec, seed, opts.n_sims, opts.relative_loss)
            runs[spec, seed] = run
            print(to_json(run), file=sys.stderr, flush=True)
            if opts.results:
                with open(opts.results, "a") as f:
                    f.write(to_json(run) + "\n")
    base = opts.arms[0]
    rows, per_seed = [], {}
    for spec in opts.arms[1:]:
        for stat in ("mean", "p90", "max"):
            ratios = [runs[base, s][stat] / runs[spec, s][stat] for s in opts.seeds]
            case = f"burgers3 {spec} {stat} ({base}/arm)"
            per_seed[case] = [round(r, 3) for r in ratios]
            rows.append({
                "case": case,
                "ours": statistics.median(runs[spec, s][stat] for s in opts.seeds),
                "baseline": statistics.median(runs[base, s][stat] for s in opts.seeds),
                "unit": "rel L2", "ratio": statistics.median(ratios), "target": 1.0,
            })  # fmt: skip
    notes = [f"{case}: per seed {r}, wins {sum(x > 1 for x in r)}/{len(r)}"
             for case, r in per_seed.items()]  # fmt: skip
    shares = {spec: [runs[spec, s]["share_low_nu"] for s in opts.seeds] for spec in opts.arms}
    notes += [f"{spec}: share of draws with nu < {LOW_NU}: {v}" for spec, v in shares.items()]
    title = f"worst held-out case, {opts.n_sims} simulations, seeds {opts.seeds}"
    finish(rows, title, 40, as_json=opts.json, notes=notes, per_seed=per_seed, share_low_nu=shares)
    return None


if __name__ == "__main__":
    main()
