"""Which recorded run of benchmarks/active_sampling.py an invocation reuses: a run's key
(`fingerprint`: what it must share with this invocation), the runs of the results files
under their keys (`recorded`), the seeds' phases (`phase`: tuning or evaluation, each with
its own test sets, `TEST_SEEDS`) and the options the first runs were recorded with
(`RECORDED_BREED`, `RECORDED_DENSITY`), which keep those runs valid as defaults change.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from active_sampling_stats import FIXED, Run
from heat_problem import Setup

from melissa_trainer.launcher.breed import BreedSampler
from melissa_trainer.launcher.density import DensitySampler
from melissa_trainer.launcher.density_contrast import contrast_for
from melissa_trainer.launcher.explorers import candidates_for, engine_for
from melissa_trainer.launcher.surrogate import SurrogateSampler

#: DensitySampler's defaults now (its keyword options)
DENSITY_DEFAULTS: dict[str, Any] = {
    name: parameter.default
    for name, parameter in inspect.signature(DensitySampler).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
}
#: its defaults when the density runs of issue 46's second and third rounds were recorded
#: (their key held the --density options as given, none): a density run's key holds the
#: options it resolves to that differ from these, so that those runs stay valid and a run
#: under other defaults gets another key
RECORDED_DENSITY: dict[str, Any] = {
    "share": 0.5, "quantile": 0.25, "bandwidth": 0.1, "window": 100, "min_observations": 8,
    "tilt": None, "candidates": 1, "evidence": 3.0, "edge": 0.7, "contrast": None,
}  # fmt: skip
#: BreedSampler's own explorer, that of a --breed without one
DEFAULT_EXPLORER: str = inspect.signature(BreedSampler).parameters["explorer"].default
#: SurrogateSampler's own spacing, that of a --surrogate without one (0 until 2026-12-02)
DEFAULT_SPACING: float = inspect.signature(SurrogateSampler).parameters["spacing"].default
#: Breed's options when the first runs were recorded: the fixed designs' runs are keyed
#: with them (`fingerprint`), whatever `BREED` has become since
RECORDED_BREED = {"exploration": 0.7, "sigma": 0.15, "floor": 0.5, "min_observations": 8,
                  "candidates": 16}  # fmt: skip
#: seeds from this one on are evaluation seeds: no Breed setting was chosen on them (the
#: surrogate's ``spacing`` 0.1 was, on 1000-1009); below it, tuning seeds (Breed's: 0-4)
EVALUATION_FIRST_SEED = 1000
#: the test sets' seeds (uniform, hard), per phase: the evaluation's are their own
TEST_SEEDS = {"tuning": (10_000, 10_001), "evaluation": (20_000, 20_001)}


def phase(seed: int) -> str:
    return "evaluation" if seed >= EVALUATION_FIRST_SEED else "tuning"


def fingerprint(setup: Setup, n_test: int, n_hard: int, kind: str = "breed") -> str:
    """What a recorded run of arm `kind` must share with this invocation to be reused:
    the setup (space, sizes, Breed's options) and the test sets' sizes (their seeds
    follow from the run's seed: `phase`). The fixed designs do not read Breed's
    options: their key takes `RECORDED_BREED` instead, so that their runs stay valid
    whatever Breed's options (those recorded before the key said so included). Breed's
    ``explorer`` enters as the engine it resolves to in this space (unnamed: the
    library's default; "auto" resolves by the varying parameters), left out when
    "sobol", as the runs recorded before the option existed left it, and
    ``candidates`` as the count it resolves to (unnamed: 16 for a sequence, 1 for
    "lhs"): the same draws, the same key."""
    breed = dict(RECORDED_BREED) if kind in FIXED + ("surrogate", "density") else dict(setup.breed)
    if kind not in FIXED + ("surrogate", "density"):
        engine = engine_for(breed.pop("explorer", DEFAULT_EXPLORER), len(setup.varying))
        breed["candidates"] = candidates_for(engine, breed.get("candidates"))
        breed.update({} if engine == "sobol" else {"explorer": engine})
    keyed = asdict(replace(setup, breed=breed))
    if kind != "surrogate":  # the runs recorded before the option existed: their keys
        keyed.pop("surrogate")
    else:  # the spacing it resolves to, left out at 0 (the runs recorded before its
        # default became 0.1 named none: their key; an unnamed one now is not theirs)
        surrogate = {"spacing": DEFAULT_SPACING, **keyed["surrogate"]}
        keyed["surrogate"] = {k: v for k, v in surrogate.items() if (k, v) != ("spacing", 0)}
    if kind != "density":
        keyed.pop("density")
    else:  # the options the sampler resolves to that differ from the first runs' ones
        resolved = {**DENSITY_DEFAULTS, **keyed["density"]}
        resolved["contrast"] = contrast_for(
            resolved["contrast"], len(setup.varying), resolved["edge"]
        )
        keyed["density"] = {
            k: v
            for k, v in resolved.items()
            if k not in RECORDED_DENSITY or RECORDED_DENSITY[k] != v
        }
    text = json.dumps({"setup": keyed, "test": n_test, "test_hard": n_hard,
                       "test_seeds": TEST_SEEDS}, sort_keys=True)  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def recorded(results: list[Path], keys: dict[str, str]) -> dict[tuple[str, int], Run]:
    """The runs of the `results` files (JSON lines, one run each; a missing file holds
    none) recorded with their arm's fingerprint in `keys` (arm: key), by (arm, seed);
    the first record of a run wins."""
    runs: dict[tuple[str, int], Run] = {}
    for path in results:
        lines = path.read_text().splitlines() if path.exists() else []
        for line in lines:
            if line.strip():
                run = json.loads(line)
                if run.get("fingerprint") == keys.get(run.get("sampler", "")):
                    runs.setdefault((run["sampler"], run["seed"]), run)
    return runs
