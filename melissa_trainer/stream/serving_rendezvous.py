"""Where a rank's serving socket can be reached: ``serve_{rank}.json`` in the stream's
rendezvous directory, beside the receivers' ``rank_{rank}.json`` (docs/protocol.md,
section 16). Written by the trainer once its serving socket is bound (to a temporary
file, then renamed: never read half-written), removed when it stops serving; read by a
client at its first prediction request and again after a failure (a restarted trainer
publishes a new endpoint). Standard library and the protocol's checks only.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from melissa_trainer import wire as protocol
from melissa_trainer.stream.host_scope import published_scope
from melissa_trainer.stream.rank_bounds import MAX_WORLD, is_whole, read_file
from melissa_trainer.wire import FieldSpec

__all__ = [
    "NO_SERVER",
    "OTHER_RUN",
    "OTHER_RUNS_SHOWN",
    "SERVE_VERSION",
    "check_inputs",
    "read_serving",
    "remove_serving",
    "serve_file",
    "serving_bind",
    "serving_rank_bind",
    "write_serving",
]

SERVE_VERSION = 1
#: a serve file's name: 1 to 9 ASCII digits, as the C client reads them (serve_read.c);
#: ``\d+`` took any Unicode digits and any count here, so a name one client read the
#: other skipped
_SERVE_FILE = re.compile(r"serve_([0-9]{1,9})\.json")


def serve_file(directory: str | os.PathLike[str], rank: int) -> Path:
    return Path(directory) / f"serve_{rank}.json"


def write_serving(
    directory: str | os.PathLike[str],
    rank: int,
    world_size: int,
    endpoint: str,
    inputs: list[FieldSpec],
    run_id: str | None,
    curve_public_key: str | None,
) -> Path:
    """Publish rank `rank`'s serving endpoint, the inputs it takes, the run's id, and
    the host and scope that reach a loopback endpoint (`host_scope.published_scope`)."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {
        "version": SERVE_VERSION,
        "rank": rank,
        "world_size": world_size,
        "endpoint": endpoint,
        "inputs": [{"name": f.name, "dtype": f.dtype.str, "shape": list(f.shape)} for f in inputs],
        # (who can reach a loopback endpoint: a predictor elsewhere is told at once)
        **published_scope(),
    }
    if curve_public_key is not None:
        info["curve_public_key"] = curve_public_key
    if run_id is not None:
        info["run_id"] = run_id
    fd, tmp = tempfile.mkstemp(prefix=f".serve_{rank}.", suffix=".tmp", dir=path)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(info, f)
        final = serve_file(path, rank)
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    for other in path.iterdir():  # files of ranks a run on more ranks left behind
        match = _SERVE_FILE.fullmatch(other.name)
        if match is not None and int(match.group(1)) >= world_size:
            other.unlink(missing_ok=True)
    return final


def remove_serving(directory: str | os.PathLike[str], rank: int, endpoint: str) -> None:
    """Remove rank `rank`'s file if it still names `endpoint` (not a newer trainer's).
    Never raises: a file it cannot read or remove is left, and said at WARNING with the
    error (a predictor reading it dials an endpoint nobody serves); a missing one is not
    said (nothing to remove). Read as every reader of a serve file reads it
    (`rank_bounds.read_file`): an integer of any length, the words of a file that is
    not a JSON object the C client's."""
    path = serve_file(directory, rank)
    try:
        if read_file(path).get("endpoint") == endpoint:
            path.unlink(missing_ok=True)
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        import logging  # (here: a client's import stays light, without logging)

        logging.getLogger(__name__).warning(
            "could not remove %s (%s): a predictor reading it dials an endpoint that "
            "serves no more",
            path,
            exc,
        )


#: how `read_serving`'s why begins when only serve files of another run are there (a
#: client fails at once then: `client.predict_lookup.other_run`)
OTHER_RUN = "the trainer serving there belongs to another run"
#: the other runs, or the world sizes, `read_serving`'s why names at most, the others
#: counted (C's SHOWN, serve_read.c: its why, and their words, are of bounded size)
OTHER_RUNS_SHOWN = 5
#: `read_serving`'s why when the directory holds no serve file (of any run)
NO_SERVER = "no trainer serves predictions there (yet)"


def read_serving(
    directory: str | os.PathLike[str], simulation_id: int, run_id: str | None
) -> tuple[dict[str, Any] | None, str]:
    """The entry of the rank that serves `simulation_id` (``simulation_id % W``), or
    None and why not (no file yet, files of another run or of several world sizes).
    Files of another run than `run_id` (when given) are ignored."""
    directory = Path(directory)
    try:
        names = [p.name for p in directory.iterdir()]
    except OSError as exc:
        return None, f"cannot list {str(directory)!r}: {exc.strerror or exc}"
    entries: dict[int, dict[str, Any]] = {}
    other_runs = set()
    for name in names:
        match = _SERVE_FILE.fullmatch(name)
        if match is None:
            continue
        try:
            # (an integer of any number of digits read, as C reads it: json.loads found a
            # file with one past int()'s limit, of any member, unreadable and skipped it)
            entry = read_file(directory / name)  # (bytes not UTF-8: refused, as by C)
            # (whole numbers, not true nor 1.0, the world within the rank files' bound:
            # as the C client reads them, clients/c/src/serve_read.c)
            ok = (
                is_whole(entry["version"], SERVE_VERSION)
                and is_whole(entry["rank"], int(match.group(1)))
                and type(entry["world_size"]) is int
                and 0 <= entry["rank"] < entry["world_size"] <= MAX_WORLD
                and isinstance(entry["endpoint"], str)
                and isinstance(entry["inputs"], list)
            )
            specs = protocol.field_specs(
                {str(f["name"]): (tuple(f["shape"]), f["dtype"]) for f in entry["inputs"]}
            )
            published = entry.get("run_id")
            if published is not None:
                protocol.check_run_id(published, "run_id")
        except (OSError, ValueError, KeyError, TypeError):
            continue  # being replaced, or not ours: looked at again at the next try
        if not ok:
            continue
        if run_id is not None and published is not None and published != run_id:
            other_runs.add(published)
            continue
        entry["inputs"] = specs
        entries[entry["rank"]] = entry
    sizes = {e["world_size"] for e in entries.values()}
    if len(sizes) == 1:
        (world,) = sizes
        served = entries.get(simulation_id % world)
        if served is not None:
            return served, ""
        return None, f"rank {simulation_id % world} of {world} does not serve (yet)"
    if len(sizes) > 1:
        return None, f"serve files disagree on world_size: {_listed(sorted(sizes))}"
    if other_runs:
        return None, other_runs_words(other_runs)
    return None, NO_SERVER


def other_runs_words(runs: set[str]) -> str:
    """`read_serving`'s why when only serve files of other `runs` are there: `OTHER_RUN`
    and the runs, sorted, as Python prints a list (run ids hold no quote), the first
    `OTHER_RUNS_SHOWN` of them and their count past that: "(['run-a', 'run-b', 'run-c',
    'run-d', 'run-e', ... (7 in all)])", as the C client says it (serve_read.c)."""
    return f"{OTHER_RUN} ({_listed(sorted(runs))})"


def _listed(items: list[Any]) -> str:
    """`items` as Python prints their list, the first `OTHER_RUNS_SHOWN` and their count
    past that ("[2, 3, 4, 5, 6, ... (9 in all)]"; rank_bounds.missing_words's form)."""
    shown = ", ".join(repr(item) for item in items[:OTHER_RUNS_SHOWN])
    more = f", ... ({len(items)} in all)" if len(items) > OTHER_RUNS_SHOWN else ""
    return f"[{shown}{more}]"


def check_inputs(arrays: Mapping[str, np.ndarray], inputs: Sequence[FieldSpec]) -> str | None:
    """Why `arrays` are not the declared `inputs` (names, dtypes, shapes), or None."""
    names = [f.name for f in inputs]
    if set(arrays) != set(names):
        unknown, missing = sorted(set(arrays) - set(names)), sorted(set(names) - set(arrays))
        pairs = (("unknown", unknown), ("missing", missing))
        which = [f"{what}: {', '.join(map(repr, found))}" for what, found in pairs if found]
        return (
            f"arrays {sorted(arrays)}, the trainer serves inputs {sorted(names)} "
            f"({'; '.join(which)})"
        )
    for spec in inputs:
        arr = arrays[spec.name]
        if arr.dtype != spec.dtype or arr.shape != spec.shape:
            cast = f" (cast it to {spec.dtype.str})" if arr.dtype != spec.dtype else ""
            return (
                f"input {spec.name!r} is {arr.dtype.str} {arr.shape}, declared "
                f"{spec.dtype.str} {spec.shape}{cast}{_batch_hint(arr.shape, spec.shape)}"
            )
    return None


def _batch_hint(given: tuple[int, ...], declared: tuple[int, ...]) -> str:
    """The fix when `given` is `declared` under a leading dimension: a batch of
    requests, PyTorch's habit (`u[None]`), where one request is one sample. The C
    client says the same (clients/c/src/predict_names.c)."""
    if len(given) != len(declared) + 1 or given[1:] != declared:
        return ""
    return (
        f" (a request is one sample, without a batch dimension: drop the leading "
        f"{given[0]}, one request per sample)"
    )


def serving_bind(receiver: str, rank: int) -> str:
    """A serving bind on the receiver's interface (`receiver`: its configured bind,
    before the rank's port offset): the same host, a random port; an ipc path gets a
    suffix (``.serve{rank}``); anything else: loopback, a random port."""
    if receiver.startswith("tcp://"):
        return f"{receiver.rpartition(':')[0]}:*"
    if receiver.startswith("ipc://"):
        return f"{receiver}.serve{rank}"
    return "tcp://127.0.0.1:*"


def serving_rank_bind(bind: str, rank: int) -> str:
    """Rank `rank`'s bind of an explicit serving `bind` (``ServingHook(bind=...)``),
    offset as the receivers' (`StreamSource`): an explicit TCP port + `rank`
    (``tcp://h:6000`` -> rank r binds ``6000 + r``), an ipc path suffixed ``.{rank}``
    from rank 1 on, so that the ranks of one host do not clash (the second rank's bind
    failed with EADDRINUSE; the same ipc path would have been taken over by the last
    rank to bind). A random port (``*``, ``0``) and rank 0 keep `bind` as it is."""
    if rank == 0:
        return bind
    if bind.startswith("ipc://"):
        return f"{bind}.{rank}"
    if not bind.startswith("tcp://"):
        return bind
    host, _, port = bind.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return bind
    return f"{host}:{int(port) + rank}"
