"""The runs of `online_vs_offline.py`'s cases: each pipeline in a process of its own
(`child`, forked from the fork server of `isolated.py`), case 1 (`equal_data`), cases 2
and 3 (`equal_budget`, online's run in it `online_budget`), and the prefix of offline's
simulations that a share of the budget or of the disk holds (`prefix`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import heat_offline
import heat_pipelines as hp
import torch
from isolated import run_isolated
from online_vs_offline_report import Run
from online_vs_offline_sizing import TooShort, arm_pace, study_cap

#: what the pipelines' processes import, once, in the fork server (`isolated.py`)
PRELOAD = ("heat_offline", "heat_pipelines")


def child(fn: str, setup: dict[str, Any], workdir: Path, **kwargs: Any) -> Run:
    """Run pipeline function `fn` (of `heat_pipelines` or `heat_offline`) in a fresh
    process (forked from a server that imported torch once: `isolated.py`); its `Run`.
    The process's output is in ``{workdir}.{fn}.log`` (beside `workdir`, whose bytes
    on disk are measured)."""
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir.with_name(f"{workdir.name}.{fn}.log")
    if fn in ("run_online", "train_offline", "train_from_memory"):
        kwargs["validation"] = validation_file(setup, workdir)
    return run_isolated(pipeline, fn, setup, str(workdir), kwargs, log=log, preload=PRELOAD)


#: the held-out set of each setup, computed once (its simulations cost `substeps` times
#: more with the solver's sub-steps): {setup's key: path of the saved tensors}
_validation_files: dict[str, Path] = {}


def validation_file(setup: dict[str, Any], workdir: Path) -> str:
    """Where the held-out set of `setup` is saved: computed at the first call, beside
    `workdir`'s case folder (outside every measured folder)."""
    fields = hp.Setup(**setup)
    key = json.dumps([fields.grid_size, fields.time_steps, fields.dt, fields.substeps,
                      fields.seed, fields.n_validation])  # fmt: skip
    if key not in _validation_files:
        path = workdir.parent / f"validation-{len(_validation_files)}.pt"
        torch.save(hp.validation_set(fields), path)
        _validation_files[key] = path
    return str(_validation_files[key])


def pipeline(fn: str, setup_fields: dict[str, Any], workdir: str, kwargs: dict[str, Any]) -> Run:
    """In the child: run one pipeline; its `Run`."""
    setup = hp.Setup(**setup_fields)
    if "validation" in kwargs:
        kwargs["validation"] = tuple(torch.load(kwargs["validation"]))
    if fn == "train_offline":  # reads the files it is given, writes nothing
        return heat_offline.train_offline(setup, **kwargs)
    if fn == "simulate_offline":
        return heat_offline.simulate_offline(setup, Path(workdir), **kwargs)
    return getattr(hp, fn)(setup, Path(workdir), **kwargs)


def prefix(files: list[list[Any]], *, until: float | None = None, bytes_max: int | None = None):
    """The simulations an offline run stopping at `until` s (or whose disk holds at most
    `bytes_max` bytes) has: paths, and when the last was complete."""
    chosen, used, last = [], 0, 0.0
    for path, done in files:
        size = Path(path).stat().st_size + Path(path + ".json").stat().st_size
        if until is not None and done > until:
            break
        if bytes_max is not None and used + size > bytes_max:
            break
        chosen.append(path)
        used, last = used + size, done
    return chosen, last, used


def equal_data(setup: dict[str, Any], work: Path, n: int, ratio: float) -> dict[str, Run]:
    simulated = child("simulate_offline", setup, work / "offline", n_simulations=n)
    if simulated["simulations"] != n:
        raise RuntimeError(f"offline: {simulated['simulations']} of {n} simulations completed")
    files = [path for path, _ in simulated["files"]]
    online = child("run_online", setup, work / "online", n_simulations=n, ratio=ratio)
    trained = child("train_offline", setup, work, files=files, epochs=round(ratio))
    streamed = child("stream_alone", setup, work / "stream", n_simulations=n)
    alone = child(
        "train_from_memory", setup, work / "memory", files=files, steps=online["steps"], ratio=ratio
    )
    steps = hp.Setup(**setup).time_steps
    for run in (online, streamed):  # every (simulation, step) exactly once
        if run["samples_received"] != n * steps:
            raise RuntimeError(f"{run['pipeline']}: {run['samples_received']} samples received")
    return {"simulate": simulated, "online": online, "offline": trained, "alone": alone,
            "streamed": streamed}  # fmt: skip


def online_budget(
    setup: dict[str, Any], work: Path, budget: float, eval_every: float,
    seconds_per_simulation: float,
) -> Run:  # fmt: skip
    """Case 2's online pipeline: simulations streamed into the trainer for `budget` s."""
    cap = study_cap(budget, seconds_per_simulation)
    online = child(
        "run_online", setup, work, n_simulations=cap, budget=budget, eval_every=eval_every
    )
    if online["simulations"] >= cap or online["wall"] < budget:
        raise RuntimeError(f"online ran out of simulations ({cap}) before the budget ended")
    return online


def equal_budget(
    setup: dict[str, Any], work: Path, budget: float, splits: list[float], fraction: float,
    eval_every: float, seconds_per_simulation: float, ab: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """Cases 2 and 3; with `ab`, case 2's online pipeline also with ``placement="none"``
    (run before ours, and ours first on the other side of offline's runs: A B ... B A)."""
    others: list[Run] = []
    if ab:
        old = {**setup, "placement": "none"}
        # (its study sized from its own pace, not ours: `arm_pace`)
        old_pace = arm_pace(seconds_per_simulation, setup, old)
        others.append(online_budget(old, work / "online-none-1", budget, eval_every,
                                    old_pace))  # fmt: skip
    online = online_budget(setup, work / "online", budget, eval_every, seconds_per_simulation)
    cap = study_cap(budget, seconds_per_simulation)
    simulated = child(
        "simulate_offline", setup, work / "offline", n_simulations=cap,
        duration=max(splits) * budget,
    )  # fmt: skip
    offline = {}
    for f in splits:
        files, _, used = prefix(simulated["files"], until=f * budget)
        if not files:
            raise TooShort(
                f"offline, simulating {f:.0%} of the {budget:g} s budget: no simulation "
                f"was complete by then (one takes ~{seconds_per_simulation:.2g} s): raise "
                "--budget or drop that share from --splits"
            )
        run = child(
            "train_offline", setup, work, files=files, duration=budget - f * budget,
            start_time=f * budget, eval_every=eval_every,
        )  # fmt: skip
        offline[f] = {**run, "share": f, "bytes_on_disk": used}
    storage = int(fraction * online["bytes_streamed"])
    files, done, used = prefix(simulated["files"], bytes_max=storage)
    if not files:  # (a file is a simulation's samples, its .npy header and its JSON)
        n = online["simulations"]
        raise TooShort(
            f"offline with a disk of {fraction:g} of what online streamed ({storage:,} B: "
            f"online completed {n} simulation{'s' * (n != 1)} in the {budget:g} s) holds no "
            "simulation: raise --storage_fraction or --budget"
        )
    stored = child(
        "train_offline", setup, work, files=files, duration=budget - done, start_time=done,
        eval_every=eval_every,
    )  # fmt: skip
    stored.update(bytes_on_disk=used, storage_budget=storage)
    out = {"online": online, "offline": offline, "storage": stored, "simulate": simulated}
    if ab:
        out["online_ab"] = [online, online_budget(setup, work / "online-2", budget, eval_every,
                                                  seconds_per_simulation)]  # fmt: skip
        others.append(online_budget(old, work / "online-none-2", budget, eval_every,
                                    old_pace))  # fmt: skip
        out["online_none"] = others
    return out
