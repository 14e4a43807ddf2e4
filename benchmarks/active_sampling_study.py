"""One study of the active-sampling benchmark (`active_sampling.py`): the samplers of its
arms (`make_arm`: the fixed designs, Breed, its exploration alone, the surrogate
acquisition, the high-loss density) and a real study of the heat problem
(`heat_problem`) with one of them (`run_study`: the `Launcher` runs the solver, a
`Study` streams it into `OnlineTrainer`), judged on held-out simulations (`tails`).
`active_sampling.py` runs each in its own process and re-exports these names.
"""

from __future__ import annotations

import math
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch
from scipy.stats import qmc

sys.path.insert(0, str(Path(__file__).resolve().parent))
import heat_pipelines as hp  # noqa: E402
from active_sampling_stats import Run  # noqa: E402
from heat_problem import HARD_FROM, Setup, features, make_model, target  # noqa: E402

from melissa_trainer import (  # noqa: E402
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
)
from melissa_trainer.launcher import Launcher, LauncherTuning, ListSampler, make_sampler  # noqa: E402
from melissa_trainer.launcher.simulation_record import records_of  # noqa: E402


def fixed_design(setup: Setup, kind: str, seed: int) -> list[dict[str, float]]:
    """The `setup.simulations` parameter sets of a fixed design over the varying
    parameters only (the fixed ones would weigh in an optimisation without mattering):
    "lhs_opt" a Latin hypercube optimised for its centered discrepancy (scipy's
    ``optimization="random-cd"``), "sobol" the first points of a scrambled Sobol'
    sequence."""
    idx, d = setup.varying, len(setup.varying)
    rng = np.random.default_rng([seed, 31])
    if kind == "lhs_opt":
        unit = qmc.LatinHypercube(d, optimization="random-cd", rng=rng).random(setup.simulations)
    elif kind == "sobol":
        with warnings.catch_warnings():  # 48 is not a power of two: the study's budget
            warnings.filterwarnings("ignore", message=".*balance properties.*")
            unit = qmc.Sobol(d, scramble=True, rng=rng).random(setup.simulations)
    else:
        raise ValueError(f"no fixed design {kind!r}")
    designs = []
    for point in unit:
        values = {n: lo for n, (lo, _) in setup.bounds.items()}
        for i, u in zip(idx, point, strict=True):
            low, high = setup.bounds[setup.names[i]]
            values[setup.names[i]] = float(low + u * (high - low))
        designs.append(values)
    return designs


def make_arm(setup: Setup, kind: str, seed: int) -> Any:
    """The sampler of arm `kind` (one of `ARMS`)."""
    if kind == "lhs":  # scipy's plain random Latin hypercube, the library's "lhs"
        return make_sampler("lhs", setup.bounds, seed=seed)
    if kind in ("lhs_opt", "sobol"):
        return ListSampler(fixed_design(setup, kind, seed))
    if kind == "surrogate":
        return make_sampler("surrogate", setup.bounds, seed=seed, **setup.surrogate)
    if kind == "density":
        return make_sampler("density", setup.bounds, seed=seed, **setup.density)
    options = dict(setup.breed)
    if kind == "explore":  # every draw explores (a decaying share would breed again)
        options.update(exploration=1.0, exploration_final=None)
    return make_sampler("breed", setup.bounds, seed=seed, **options)


#: the adaptive arms, each with the flag that holds its options
ARM_FLAGS = {"explore": "--breed", "breed": "--breed", "surrogate": "--surrogate",
             "density": "--density"}  # fmt: skip


def check_arms(setup: Setup, arms: tuple[str, ...], seed: int) -> None:
    """Build each adaptive arm's sampler of `arms` once (`make_arm`), so that an option
    it refuses (a misspelt name, a value out of range) is refused before any study runs,
    with the sampler's message and the flag that gave it: a ValueError. The fixed
    designs are not built (the optimised one takes seconds) and take no option."""
    for kind in arms:
        if kind in ARM_FLAGS:
            try:
                make_arm(setup, kind, seed)
            except (TypeError, ValueError) as error:
                raise ValueError(f"{ARM_FLAGS[kind]}: {error}") from None


def run_study(setup: Setup, kind: str, seed: int, workdir: Path, tests: Path) -> Run:
    """One study (in a child process): arm `kind` (one of `ARMS`) draws
    `setup.simulations` simulations, streamed into `OnlineTrainer` for exactly
    `setup.steps` steps; then the test errors. Raises if a simulation of the budget
    did not finish."""
    torch.set_num_threads(1)  # the other core runs the simulations
    sampler = make_arm(setup, kind, seed)
    n = setup.grid_size
    launcher = Launcher([sys.executable, str(hp.SOLVER), *setup.config.argv()], sampler,
                        setup.simulations, env={"OMP_NUM_THREADS": "1"},
                        tuning=LauncherTuning(poll_interval=hp.POLL))  # fmt: skip
    stream = StreamSource(
        ReceiverConfig(rendezvous_dir=workdir / "rendezvous",
                       fields={"temperature": ((n, n), "float32")})
    )  # fmt: skip
    args = TrainingArguments(
        output_dir=str(workdir / "trainer"), seed=seed, batch_size=setup.batch_size,
        logging_steps=10**9, report_to="none", disable_progress_bar=True, save_at_end=False,
        buffer="reservoir", watermark=setup.watermark,
        buffer_size=setup.simulations * setup.time_steps,  # every sample kept
        sample_to_insert_ratio=setup.ratio,
        sample_to_insert_tolerance=setup.ratio + setup.batch_size,  # the least allowed
        max_steps=setup.steps,
        pseudo_epochs=10**6,  # after the stream, replay the reservoir until max_steps
    )  # fmt: skip
    model = make_model(setup, seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=setup.learning_rate)
    cosine = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: 0.5 * (1.0 + math.cos(math.pi * min(step / setup.steps, 1.0)))
    )

    def process_sample(sample: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        x = features(setup, sample["parameters"], int(sample["time_step"]))
        return torch.from_numpy(x), torch.from_numpy(target(sample["temperature"]))

    trainer = OnlineTrainer(
        model, args, optimizer, cosine,
        train_source=Study(launcher, stream), process_sample=process_sample,
    )  # fmt: skip
    adaptive = kind in ("explore", "breed", "surrogate", "density")
    spent = _time_sampler(sampler) if adaptive else [0.0]
    start = time.perf_counter()
    state = trainer.train()
    wall = time.perf_counter() - start
    summary = launcher.summary()
    if summary.get("finished") != setup.simulations or state.global_step != setup.steps:
        raise RuntimeError(
            f"{kind} seed {seed}: {summary.get('finished')} of {setup.simulations} "
            f"simulations finished in {state.global_step} of {setup.steps} steps: give "
            f"the stream more steps (--steps) or a smaller --stream_share"
        )
    data = np.load(tests)
    records = records_of(launcher.state_dict())
    parameters = [records[sid]["parameters"] for sid in sorted(records)]  # launch order
    hard = [p["log2_alpha"] >= HARD_FROM for p in parameters]
    run: Run = {
        "sampler": kind,
        "seed": seed,
        "steps": state.global_step,
        "wall": round(wall, 2),
        "simulations": int(summary["finished"]),
        "hard_share": round(sum(hard) / len(hard), 4),
        **tails(model, data, setup.time_steps),
        "parameters": parameters,
    }
    if adaptive:  # all are fed the losses (the control ignores them)
        run["explored"] = sampler.explored  # type: ignore[attr-defined]
        run["observed"] = len(sampler.observations)  # type: ignore[attr-defined]
        run["reductions"] = trainer.simulation_losses.reductions
        run["sampler_seconds"] = round(spent[0], 4)  # draws and observations, in the study
    return run


def tails(model: torch.nn.Module, data: Any, time_steps: int) -> dict[str, float]:
    """The test sets' errors (K^2): each set's MSE over every point of every step
    (``uniform_mse``, ``hard_mse``) and, per simulation of the uniform set (its
    `time_steps` consecutive rows), the 99th percentile and the largest of the
    simulations' MSEs (``uniform_p99``, ``uniform_max``; numpy's linear percentile);
    per simulation of the hard set (held-out parameters inside the hard region, where
    an adaptive sampler steered by the loss puts its draws), the 90th percentile and
    the largest (``hard_p90``, ``hard_max``: the worst cases where it aims)."""
    out = {}
    for name in ("uniform", "hard"):
        x, y = torch.from_numpy(data[f"{name}_x"]), torch.from_numpy(data[f"{name}_y"])
        per_simulation = hp.per_simulation_mse(model, x, y, time_steps)
        out[f"{name}_mse"] = float(per_simulation.mean())  # equal sizes: the set's MSE
        if name == "uniform":
            out["uniform_p99"] = float(np.percentile(per_simulation, 99))
            out["uniform_max"] = float(per_simulation.max())
        else:  # (100 hard simulations by default: a p99 would be the max again)
            out["hard_p90"] = float(np.percentile(per_simulation, 90))
            out["hard_max"] = float(per_simulation.max())
    return out


def _time_sampler(sampler: Any) -> list[float]:
    """Wrap `sampler`'s draw and observe to add their seconds to the returned cell."""
    spent = [0.0]
    for name in ("draw", "observe"):
        method = getattr(sampler, name)

        def timed(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            begin = time.perf_counter()
            try:
                return _method(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - begin

        setattr(sampler, name, timed)
    return spent
