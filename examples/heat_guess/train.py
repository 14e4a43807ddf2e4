"""The surrogate served back to the running simulations while it trains (issue 47): a
study of implicit heat solvers that ask the trainer for the initial guess of each
step's iterative solve (`solver.py`), and the trainer that learns that guess from
their own stream while answering them (`ServingHook`).

The surrogate: ``increment = K * residual``, one convolution (`OddConv`, kernel 11 by
default, no bias) of the step's initial residual ``f - A u``, with the Dirichlet
conditions as odd (antisymmetric) padding. The exact increment is ``A^-1 (f - A u)``,
and ``A^-1`` acts, away from nothing but its own decay, as such a convolution: the
architecture can learn it, and from every grid point of every sample. Training pairs
are normalised per sample by the residual's RMS (the map is linear: the same map).

The first simulations start before training: their first requests are answered by the
untrained model (version 0), whose guesses the check turns down (or not at all, when they
ask before the trainer serves), and they solve from their previous state until the
model trains; the later ones get a trained model. The example
prints, per simulation, the solver's work per step (products by A, the guess's check
included) with the surrogate's guesses, next to the work of the same simulation solved
from its previous state (computed here in the same process: it does not depend on the
trainer), and the surrogate's final error on held-out simulations.

    python examples/heat_guess/train.py                   # 6 simulations, 5 to 25 s on 2 cores
    python examples/heat_guess/train.py --method cg       # conjugate gradient instead
    python examples/heat_guess/train.py --no_surrogate    # the simulations never ask
    python examples/heat_guess/train.py --guess_check none  # every guess taken, unchecked
    python examples/heat_guess/train.py --json            # last line: a JSON summary
    python examples/heat_guess/train.py --output_dir out  # stopped by SIGTERM or Ctrl-C:
    python examples/heat_guess/train.py --output_dir out --resume_from_checkpoint latest
    accelerate launch --multi_gpu --num_processes 2 examples/heat_guess/train.py
                                         # 2 ranks: each serves the simulations id % 2

It takes only its own flags (``--help``): its `TrainingArguments` are fixed in
`run_study`, not read from the command line as the heat_pde and lorenz examples' are,
but for ``--resume_from_checkpoint`` and ``--overwrite_output_dir``. A run stopped by
SIGTERM or Ctrl-C writes a
checkpoint in ``--output_dir`` (none in a temporary directory's run is kept) and is
continued by the same command with ``--resume_from_checkpoint latest``: the simulations
done keep their records, those running at the stop run again. A finished run keeps its
end's checkpoint (``save_at_end``, the library's default): a SIGTERM that came as it
ended (after its last stop synchronisation) makes it exit 143, its report unprinted, and
the same resume prints that report, no simulation run again (until 2026-12-07 it kept
none, and that resume ran the whole study again). A run killed (SIGKILL) before any
checkpoint is run again from the start. The same command without the flag in a folder
that holds a checkpoint, a finished run's included, is refused, saying so
(``--overwrite_output_dir`` starts afresh there, the checkpoints moved aside).

On several ranks every rank must find the same folder: without `--output_dir` they use
``outputs/heat_guess`` (one run's temporary directory is per process), and rank 0 prints;
the next run there is refused as above (its checkpoint kept): give it another
``--output_dir``, or ``--overwrite_output_dir``.

`benchmarks/closed_loop.py` runs this study with and without the surrogate, alternated,
and reports the work saved over the second half of the study.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

if str(Path(__file__).resolve().parents[1]) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from heat_guess.cli import check_kernel, parse, rerun_words  # noqa: E402

if __name__ == "__main__":
    # --help and a refused flag answer before torch's import below (16-29 s on a loaded
    # machine); main parses again, cheaply
    parse(None, __doc__)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from heat_guess.report_words import second_half, serving_sentence, work_words  # noqa: E402
from heat_guess.solver import PARAMETER_BOUNDS, GuessConfig, Work, steps  # noqa: E402
from heat_guess.user_dir import (  # noqa: E402
    in_user_words,
    resume_or_afresh,
    resumes_a_checkpoint,
)
from melissa_trainer import (  # noqa: E402
    ConfigError,
    OnlineTrainer,
    ServingHook,
    StreamSource,
    Study,
    TrainingArguments,
    refusals_end_the_program,
)
from melissa_trainer.common.json_output import to_json  # noqa: E402
from melissa_trainer.launcher import Launcher, LauncherTuning, UniformSampler  # noqa: E402
from melissa_trainer.trainer.lock_holder import OutputDirLocked  # noqa: E402
from melissa_trainer.trainer.resume_choice import start_refusal  # noqa: E402

SOLVER = Path(__file__).resolve().parent / "solver.py"
#: seeds of the held-out simulations (the study's draws use `seed`)
HELD_OUT_SEED = 10_000


class OddConv(torch.nn.Module):
    """A bias-free convolution of a (batch, 1, n, n) field padded by odd reflection
    about the zero Dirichlet ghost points (``[..., -x1, -x0, 0, x0, x1, ...]``): the
    padding under which ``A^-1`` of the discrete problem is a convolution."""

    def __init__(self, kernel: int = 11) -> None:
        super().__init__()
        check_kernel(kernel)
        self.reach = kernel // 2  # (not `half`: that is `Module.half()`, the float16 cast)
        self.conv = torch.nn.Conv2d(1, 1, kernel, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = self.reach
        for dim in (-2, -1):
            zero = torch.zeros_like(x.narrow(dim, 0, 1))
            low = -x.narrow(dim, 0, k - 1).flip(dim)
            high = -x.narrow(dim, x.shape[dim] - (k - 1), k - 1).flip(dim)
            x = torch.cat([low, zero, x, zero, high], dim)
        return self.conv(x)


def process_sample(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """(residual, increment), both divided by the residual's RMS, as (1, n, n)."""
    residual = sample["residual"].astype(np.float32)
    scale = max(float(np.sqrt(np.mean(residual.astype(np.float64) ** 2))), 1e-30)
    x = torch.from_numpy(residual / scale)[None]
    y = torch.from_numpy(sample["increment"].astype(np.float32) / scale)[None]
    return x, y


def held_out(config: GuessConfig, count: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation pairs of `count` simulations drawn apart from the study's, solved to
    a tight tolerance: (residuals, increments), each (N, 1, n, n)."""
    sampler = UniformSampler(PARAMETER_BOUNDS, seed=HELD_OUT_SEED)
    tight = GuessConfig(config.grid_size, config.time_steps, config.dt, 1e-10, "cg")
    pairs = [pair for _ in range(count) for pair in steps(sampler.draw(), tight)]
    xs = torch.tensor(np.stack([p[0] for p in pairs]), dtype=torch.float32)[:, None]
    ys = torch.tensor(np.stack([p[1] for p in pairs]), dtype=torch.float32)[:, None]
    return xs, ys


def relative_error(model: torch.nn.Module, xs: torch.Tensor, ys: torch.Tensor) -> float:
    """``||model(x) - y|| / ||y||`` over all the pairs (relative L2, pooled)."""
    with torch.no_grad():
        return float(torch.linalg.norm(model(xs) - ys) / torch.linalg.norm(ys))


def baseline_work(parameters: dict[str, float], config: GuessConfig) -> list[int]:
    """The products by A per step of one simulation solved from its previous state."""
    return baseline_record(parameters, config).products


def baseline_record(parameters: dict[str, float], config: GuessConfig) -> Work:
    """The record (`solver.Work`) of one simulation solved from its previous state: what
    the same simulation costs when it never asks (it does not depend on the trainer)."""
    work = Work()
    for _ in steps(parameters, config, None, work):
        pass
    return work


def run_study(
    output_dir: str | Path,
    config: GuessConfig | None = None,
    *,
    surrogate: bool = True,
    num_simulations: int = 6,
    job_limit: int = 2,
    seed: int = 0,
    kernel: int = 11,
    lr: float = 3e-3,
    batch_size: int = 16,
    share: float = 0.05,
    held_out_simulations: int = 2,
    resume_from_checkpoint: str | None = None,
    overwrite_output_dir: bool = False,
) -> dict[str, Any]:
    """One study: `num_simulations` solvers (at most `job_limit` at once), asking for
    their guesses unless not `surrogate`, and the trainer serving them. Returns the
    simulations' records (`solver.Work` fields, by id order), the trainer's global step,
    the surrogate's final relative error on held-out simulations, and the serving
    counters. `resume_from_checkpoint` continues a stopped run in `output_dir` (its
    finished simulations' records kept); `overwrite_output_dir` starts afresh there (its
    checkpoints moved aside by the trainer, its records removed)."""
    config = config or GuessConfig()
    out = Path(output_dir)
    records = out / "records"
    records.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, str(SOLVER), *config.argv(), "--record", str(records)]
    if not surrogate:
        command.append("--no_surrogate")
    launcher = Launcher(
        command,
        UniformSampler(PARAMETER_BOUNDS, seed=seed),
        num_simulations,
        job_limit=job_limit,
        backend="local",
        tuning=LauncherTuning(poll_interval=0.05),
    )
    torch.manual_seed(seed)
    model = OddConv(kernel)
    n = config.grid_size
    serving = ServingHook(
        {"residual": ((n, n), "float32")},
        process_inputs=lambda r: torch.from_numpy(r["residual"].copy())[None],
        process_outputs=lambda y: {"increment": y[:, 0]},
        share=share,
    )
    run_dir = out / "run"  # (the trainer's folder: said as the user's, `--output_dir`)
    # (its words of the output folder, for this run alone: `resume_or_afresh`)
    with resume_or_afresh(
        resume_from_checkpoint, str(output_dir), run_dir
    ) as resume_from_checkpoint:
        try:
            trainer = OnlineTrainer(
                model,
                TrainingArguments(
                    output_dir=str(run_dir),
                    batch_size=batch_size,
                    buffer="reservoir",
                    buffer_size=4 * config.time_steps * job_limit,
                    watermark=batch_size,
                    logging_steps=10**9,
                    save_at_end=True,  # (the default: a late signal's resume runs nothing again)
                    resume_from_checkpoint=resume_from_checkpoint,
                    overwrite_output_dir=overwrite_output_dir,
                    disable_progress_bar=True,
                    report_to="none",
                ),
                torch.optim.Adam(model.parameters(), lr=lr),
                train_source=Study(launcher, StreamSource()),
                process_sample=process_sample,
                hooks=[serving],
            )
        except OutputDirLocked as exc:  # (another run there: named as the user's folder)
            raise in_user_words(exc, str(run_dir), str(output_dir)) from None
        # the trainer's train() would refuse too, naming its own folder (out/run): refused
        # here in the user's words, every rank alike (rank 0 says it, `refusals_end_the_program`)
        refused = [] if resume_from_checkpoint else start_refusal(trainer)
        if refused:
            words = rerun_words(str(output_dir), refused, str(trainer.checkpoint_root))
            raise ConfigError(words, context="start")
        # an earlier run's records (rank 0's launcher starts this run's): not those of a run
        # resumed (its simulations done before), nor of one stopped there (refused above:
        # they are still its records), and only once the trainer holds the output_dir's
        # lock (taken as it is made): a study still running there refuses this one
        # (OutputDirLocked), its records its own (overwritten: the run is a fresh one,
        # whatever the checkpoints moved aside held; "latest" with no checkpoint is one too)
        if _rank() == 0 and not resumes_a_checkpoint(resume_from_checkpoint, run_dir):
            for stale in records.glob("sim*.json"):
                stale.unlink()
        state = trainer.train()
        if not trainer.accelerator.is_main_process:  # (the records and the report: rank 0's)
            return {"simulations": [], "global_step": state.global_step, "final_error": None,
                    "serving": serving.telemetry(), "main": False}  # fmt: skip
        sims = [json.loads(p.read_text()) for p in sorted(records.glob("sim*.json"))]
        sims.sort(key=lambda r: r["simulation_id"])
        xs, ys = held_out(config, held_out_simulations)
        model.eval()
        return {
            "simulations": sims,
            "global_step": state.global_step,
            "final_error": relative_error(model, xs, ys),
            "serving": serving.telemetry(),
            "main": True,
        }


def _rank() -> int:
    """This process's rank under `accelerate launch` / torchrun (0 alone)."""
    return int(os.environ.get("RANK", "0"))


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def main(argv: list[str] | None = None) -> int:
    opts, config = parse(argv, __doc__)
    torch.set_num_threads(1)  # the cores are the simulations'
    if opts.output_dir is None and _world_size() > 1:
        opts.output_dir = "outputs/heat_guess"
    with tempfile.TemporaryDirectory() as tmp:
        result = run_study(
            opts.output_dir or tmp, config, surrogate=not opts.no_surrogate,
            num_simulations=opts.num_simulations, job_limit=opts.job_limit, seed=opts.seed,
            kernel=opts.kernel, resume_from_checkpoint=opts.resume_from_checkpoint,
            overwrite_output_dir=opts.overwrite_output_dir,
        )  # fmt: skip
    if not result["main"]:
        return 0
    sims = result["simulations"]
    rows = []
    for s in sims:
        without = baseline_record(s["parameters"], config)
        rows.append({
            "simulation": s["simulation_id"],
            "work_per_step": float(np.mean(s["products"])),
            "without_surrogate": float(np.mean(without.products)),
            "iterations_per_step": float(np.mean(s["iterations"])),
            "without_surrogate_iterations": float(np.mean(without.iterations)),
            "guesses_used": int(sum(s["used"])),
            "first_version": next((v for v in s["versions"] if v >= 0), None),
        })  # fmt: skip
    half = second_half(rows)
    ours = statistics.fmean(r["work_per_step"] for r in half)
    base = statistics.fmean(r["without_surrogate"] for r in half)
    summary = {
        "method": config.method,
        "guess_check": config.guess_check,
        "simulations": rows,
        "second_half_work_per_step": ours,
        "second_half_without_surrogate": base,
        "work_saved": base / ours,
        "final_error": result["final_error"],
        "global_step": result["global_step"],
        "serving": result["serving"],
    }
    checked = {"residual": "a guess taken if its residual is the smaller",
               "none": "every guess taken, unchecked"}[config.guess_check]  # fmt: skip
    print(f"{config.method}, {checked}: products by A per time step (the guess's residual "
          "included)")  # fmt: skip
    print(" sim  with surrogate  from previous state  guesses used  first model version")
    for r in rows:
        used = f"{r['guesses_used']:8d}/{config.time_steps:<4d}"
        print(f"{r['simulation']:4d}  {r['work_per_step']:14.1f}  {r['without_surrogate']:19.1f}"
              f"  {used}  {r['first_version']}")  # fmt: skip
    print(f"second half of the study: {ours:.1f} vs {base:.1f} products per step "
          f"({work_words(ours, base)}); surrogate error on held-out simulations "
          f"{result['final_error']:.2e} after {result['global_step']} steps")  # fmt: skip
    who = f" (rank 0's, of {_world_size()} ranks)" if _world_size() > 1 else ""
    print(f"serving{who}: {serving_sentence(result['serving'])}")
    if opts.json:
        print(to_json(summary))
    return 0


if __name__ == "__main__":
    with refusals_end_the_program():  # (a refusal: one line and exit 2, no traceback)
        sys.exit(main())
