"""The oracle of the resize tests (tests/checkpoint/test_resume_resize.py's docstring):
`check_resumed`, from the records of a study's first run, interrupted after a checkpoint,
and of the run resumed from it on another number of ranks; `held` and `untrained` read
a rank's buffer and pending batches from its files."""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path

from process_tree import processes_with
from resize_runs import BUFFER_SIZE, EXPECTED, SIMULATIONS, Case, Key, Run
from safetensors.numpy import load_file


def held(directory: Path) -> list[Key]:
    """The samples a rank holds, from its buffer and pending-batch files (a checkpoint's
    ``rank_R/``, or the driver's dump after a load): one key per held sample."""
    keys: list[Key] = []
    for name, pattern in (("buffer", r"([sr]\d+)/"), ("pending", r"(b\d+/s\d+)/")):
        arrays = load_file(str(directory / f"{name}.safetensors"))
        for key, value in arrays.items():
            match = re.fullmatch(pattern + "simulation_id", key)
            if match:
                step = arrays[f"{match.group(1)}/time_step"]
                keys.append((int(value), int(step)))
    return keys


def untrained(directory: Path) -> set[Key]:
    """What a rank still held untrained (`held`): its pending batches and, in a
    reservoir, the samples never drawn; in a FIFO or FIRO, every sample."""
    meta = json.loads((directory / "buffer.json").read_text())
    keys = set(held(directory))
    if meta["kind"] == "reservoir":
        arrays = load_file(str(directory / "buffer.safetensors"))
        draws = meta["contents"]["draws"]
        keys -= {
            (int(arrays[f"s{slot}/simulation_id"]), int(arrays[f"s{slot}/time_step"]))
            for slot, n in enumerate(draws)
            if n > 0 and f"s{slot}/simulation_id" in arrays
        }
        pending = load_file(str(directory / "pending.safetensors"))
        keys |= {
            (int(v), int(pending[k.replace("simulation_id", "time_step")]))
            for k, v in pending.items()
            if k.endswith("/simulation_id")
        }
    return keys


def rank_dirs(root: Path) -> list[Path]:
    dirs = sorted(root.glob("rank_*"), key=lambda p: int(p.name.split("_")[1]))
    assert [int(p.name.split("_")[1]) for p in dirs] == list(range(len(dirs))), dirs
    return dirs


def check_resumed(
    name: str,
    case: Case,
    first: Run,
    second: Run,
    resumed_from: Path,
    saved: int,
    capacity: int | None = None,
) -> None:
    """The oracle of test_resume_resize.py's docstring, from the records of `first` (interrupted
    after its checkpoint `resumed_from`, of step `saved`) and `second` (resumed from it,
    run to its end). `capacity`: the resumed run's --buffer_size (FLAGS' by default).
    Where the reservoir samples of the checkpoint do not fit the resumed ranks' buffers
    (3 ranks' onto 2 of the same size), those it loads fill them, and those it does not
    were all trained before the checkpoint (a full reservoir evicts only those, its
    never-drawn samples kept: `buffers.reshard`)."""
    if capacity is None:
        capacity = BUFFER_SIZE
    # said once, by the main rank, with no logging set up by the example
    ranks = f"{case.before} training rank{'' if case.before == 1 else 's'}"  # (1: singular)
    said = f"was written by {ranks}, this run has {case.after}: each rank"
    times = 1 if case.before != case.after else 0  # (nothing resharded on as many ranks)
    assert Path(second.log.name).read_text().count(said) == times, second.output()

    # put once: what the checkpoint holds of the first run's puts, then the second run's
    written = rank_dirs(resumed_from)
    assert len(written) == case.before
    put_before = []
    for rank, directory in enumerate(written):
        count = json.loads((directory / "buffer.json").read_text())["put"]
        log = first.put_log(rank)
        assert len(log) >= count, (rank, count, len(log))
        put_before += log[:count]
    put_after = [key for rank in range(case.after) for key in second.put_log(rank)]
    puts = collections.Counter(put_before + put_after)
    twice = sorted(k for k, n in puts.items() if n > 1)
    assert set(puts) == EXPECTED and not twice, (
        name, saved, twice[:10], sorted(EXPECTED - set(puts))[:10],
        sorted(set(puts) - EXPECTED)[:10],
    )  # fmt: skip

    # the resize: the k ranks' samples (buffers and untrained pending batches), each
    # held once by one of the m ranks (a reservoir's pending sample is also in its
    # buffer, drawn: one sample)
    loaded = rank_dirs(second.dump)
    assert len(loaded) == case.after, loaded
    in_checkpoint = collections.Counter(k for d in written for k in held(d))
    after_load = collections.Counter(k for d in loaded for k in held(d))
    dropped = set(in_checkpoint) - set(after_load)
    if case.reservoir and dropped:
        assert sum(after_load.values()) == capacity * case.after, (capacity, after_load)
        # only samples trained before the checkpoint (the first run's lineage): not its
        # pending batches' draws, which the resize gives back
        trained_before = {k for step, keys in first.steps() if step <= saved for k in keys}
        assert dropped <= trained_before, sorted(dropped - trained_before)[:10]
        print(f"{name}: {len(dropped)} samples trained before the checkpoint evicted to fit")
        dropped = set()
    assert not dropped and set(after_load) <= set(in_checkpoint), (
        name, sorted(dropped)[:10], sorted(set(after_load) - set(in_checkpoint))[:10],
    )  # fmt: skip
    assert max(after_load.values(), default=1) == 1, sorted(after_load.items())[-3:]
    if not case.reservoir:  # a FIFO's sample is held or pending, never both
        assert max(in_checkpoint.values(), default=1) == 1

    # trained: the lineage of the final state
    before = [keys for step, keys in first.steps() if step <= saved]
    after = [keys for step, keys in second.steps()]
    assert all(step > saved for step, _ in second.steps()), saved
    trained = collections.Counter(k for keys in before + after for k in keys)
    ended = rank_dirs(second.end)
    assert len(ended) == case.after, ended
    left = set().union(*(untrained(d) for d in ended))
    print(f"{name}: resumed from step {saved}; left untrained at the end: {sorted(left)}")
    if case.after == 1:  # one rank drains its buffer: nothing is left
        assert not left, sorted(left)
    if not case.reservoir:  # a FIFO's sample still held was never served
        assert not left & set(trained), sorted(left & set(trained))[:10]
    missing = EXPECTED - set(trained) - left
    assert not missing, (name, saved, sorted(missing)[:10])
    assert set(trained) <= EXPECTED, sorted(set(trained) - EXPECTED)[:10]
    if case.reservoir:
        resumed = {k for keys in after for k in keys}
        assert resumed <= set(after_load) | set(put_after), sorted(
            resumed - set(after_load) - set(put_after)
        )[:10]
    else:
        twice = sorted(k for k, n in trained.items() if n > 1)
        assert not twice, (name, saved, twice[:10])

    lines = [line for line in Path(second.log.name).read_text().splitlines() if line[:1] == "{"]
    summary = json.loads(lines[-1])
    assert summary["samples_received"] == len(EXPECTED), summary  # the counters, exact
    assert summary["study"]["finished"] == SIMULATIONS, summary
    vectors: dict[int, set[str]] = {}
    for run in (first, second):
        run.steps()
        for sid, seen in run.parameters.items():
            vectors.setdefault(sid, set()).update(seen)
    assert {s: v for s, v in vectors.items() if len(v) != 1} == {}  # one per simulation
    assert not processes_with(str(first.out / "rendezvous"))
