"""Check a `SampleLedger`: was every (simulation, time step) trained on exactly once?

    python -m melissa_trainer.lineage check OUTPUT_DIR [--simulations N] [--steps S]

(`melissa_trainer.lineage`, the entry point, runs `main` here.)

exits 0 when the ledger passes, 1 on a violation (duplicates, missing samples), 2 when
there is no ledger to read; it prints what it found, in words. `check` does the same
from Python and returns a `LineageReport`.

**The resume rule.** The runs in the ledger are ordered by their start: by the order of
their headers in the rank files (append-only; `order_runs`), not by the headers'
wall-clock ``time``, which a resume on a node whose clock is behind puts earlier. A run's records
of steps after the step a later run resumed from are work that run redid: they are
discarded. Run k keeps its steps ``<= min(start_step of every later run)`` (a later run
started afresh discards everything before it); the last run keeps all. Several ranks,
and another number of ranks from one run to the next, are one run's records whatever
rank wrote them.

**What "exactly once" means, per buffer.**

* ``fifo`` and ``firo`` use each inserted sample once: in the kept records of
  pseudo-epoch 0, every (simulation, time step) is trained on exactly once. Not counted:
  replays of the retained samples (pseudo-epochs 1 and on, `--pseudo_epochs`), and the
  batches a rank whose stream ended first re-serves while the others finish
  (`StreamDataset.pad`, marked in the ledger): draws of samples inserted once.
* ``reservoir`` draws a sample several times, and may evict one never drawn: its
  records say how often each sample was drawn, not whether it was inserted once.
  Duplicates and samples never drawn are reported, not violations.

**Missing samples.** ``--simulations N`` expects N simulations (the ids need not be
0..N-1: a failed simulation's replacement has a new one). ``--steps`` says how long
each simulation is, in one of three forms (`Steps`):

* ``--steps S`` (a number): every simulation seen has time steps 0..S-1 (a study whose
  simulations all run S steps);
* ``--steps FILE`` (a JSON object, ``{"SIMULATION_ID": STEPS, ...}``): simulation
  ``SIMULATION_ID`` has time steps 0..STEPS-1, the exact check for simulations of
  different lengths; one it names and the ledger lacks is missing whole, one seen that
  it does not name is checked as with ``seen`` (and said);
* ``--steps seen``: each simulation has time steps 0..its last step seen, for
  simulations of different lengths whose lengths you do not have: a gap is missing,
  but the last steps of a simulation never trained on at all cannot be seen.

A simulation the study gave up (its record in the newest checkpoint says so:
`lineage_given_up`) misses its steps after its last one trained on: those are said on a
GIVEN UP line and are not a violation; a gap before that step is.

Without ``--steps``, only duplicates (and, with ``--simulations``, simulations never
seen) are checked. A line cut by a kill (the last of a run on a rank) is skipped and
said.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from melissa_trainer.common.words import plural
from melissa_trainer.hooks.lineage_given_up import set_aside
from melissa_trainer.hooks.lineage_read import Key, Run, ledger_folder, read_runs
from melissa_trainer.hooks.lineage_words import missing_line, spans

__all__ = ["LineageReport", "check", "main"]

#: buffers that use each inserted sample once (exactly once is checked)
ONCE_BUFFERS = frozenset({"fifo", "firo"})
#: how long each simulation is (module docstring, "Missing samples"): S steps each;
#: simulation id -> its steps; "seen": up to its last step seen; None: not checked
Steps = int | Mapping[int, int] | Literal["seen"] | None


@dataclass
class LineageReport:
    ok: bool
    lines: list[str]
    duplicates: dict[Key, list[tuple[int, str, int]]]  # key -> (step, run, rank) of each
    missing: list[Key]
    runs: list[Run]

    def __str__(self) -> str:
        return "\n".join(self.lines)


def check(path: str | Path, simulations: int | None = None, steps: Steps = None) -> LineageReport:
    """Apply the resume rule to the ledger at `path` and check exactly-once (module
    docstring); `simulations` and `steps` (`Steps`: one length for all, one per
    simulation, or "seen") state the study's size, to find missing samples. Raises
    FileNotFoundError when there is no ledger."""
    notes: list[str] = []
    runs = read_runs(path, notes)
    strict = all(r.buffer.lower() in ONCE_BUFFERS for r in runs)
    lines = [f"ledger {ledger_folder(path)}: {plural(len(runs), 'run')}"]
    if not strict:  # said first: what follows is not an exactly-once record
        lines.append(
            f"buffer {_draw_buffers(runs)}: its records are draws (a sample drawn several "
            "times, some evicted undrawn), so exactly-once is not checked; for an "
            "exactly-once check, train the study once with --buffer fifo"
        )
    lines += [f"warning: {note}" for note in notes]
    seen: dict[Key, list[tuple[int, str, int]]] = collections.defaultdict(list)
    padding = replays = 0
    for k, run in enumerate(runs):
        later = [r.start_step for r in runs[k + 1 :]]
        upto = min(later) if later else None
        kept = [r for r in run.records if upto is None or r[0] <= upto]
        trained = {r[0] for r in run.records}
        last = max(trained, default=run.start_step)
        words = f"steps {run.start_step + 1}-{last}" if trained else "no step"
        if upto is None:
            fate = "kept" if run.end_step is not None else "kept (it did not end: killed?)"
        elif upto >= last:
            fate = "kept"
        else:
            fate = f"kept up to step {upto}, where a later run resumed (after: redone)"
        lines.append(
            f"run {k + 1} ({run.run}, {plural(run.ranks, 'rank')}, buffer {run.buffer or '?'}): "
            f"started at step {run.start_step}, trained {words}; {fate}"
        )
        if run.torn:
            lines.append(f"  {plural(run.torn, 'line')} cut by a kill or damaged: skipped")
        for step, epoch, pad, rank, keys in kept:
            if pad:
                padding += len(keys)
            elif epoch:
                replays += len(keys)
            else:
                for key in keys:
                    seen[key].append((step, run.run, rank))
    counted = sum(len(v) for v in seen.values())
    lines.append(
        f"samples trained (kept, first pass): {counted}, distinct {len(seen)}; not counted: "
        f"{padding} padding draws, {replays} replay draws"
    )
    duplicates = {k: v for k, v in sorted(seen.items()) if len(v) > 1}
    missing, absent = _missing(seen, simulations, steps, lines)
    if strict:  # (a given-up simulation's last steps: expected, if the study says so)
        missing, absent = set_aside(missing, seen, absent, ledger_folder(path).parent, lines)
    if not strict:  # draws: a count, not a list (a reservoir's would run to kilobytes)
        lines.append(_draws(duplicates, missing, absent))
    elif duplicates:
        some = "; ".join(
            f"simulation {s} time step {t} at " + _where(runs, where)
            for (s, t), where in list(duplicates.items())[:10]
        )
        more = f"; {len(duplicates) - 10} more" if len(duplicates) > 10 else ""
        lines.append(
            f"DUPLICATES: {plural(len(duplicates), 'sample')} trained more than once: {some}{more}"
        )
    else:
        lines.append("duplicates: none")
    if missing and strict:
        lines.append(missing_line(missing))
    elif steps is not None and strict:
        lines.append("missing: none")
    violated = strict and bool(duplicates or missing or absent)
    if not seen:
        lines.append("NO SAMPLES: the ledger records no training step")
        violated = True
    lines.append("EXACTLY ONCE: " + ("VIOLATED" if violated else "OK" if strict else "n/a"))
    return LineageReport(not violated, lines, duplicates, missing, runs)


def _index(runs: list[Run], run_id: str) -> int:
    return next(i + 1 for i, r in enumerate(runs) if r.run == run_id)


def _where(runs: list[Run], where: list[tuple[int, str, int]]) -> str:
    """A duplicate's trainings, the first 3 and how many more."""
    said = ", ".join(f"step {st} (run {_index(runs, r)}, rank {rk})" for st, r, rk in where[:3])
    return said + (f" and {len(where) - 3} more" if len(where) > 3 else "")


def _draw_buffers(runs: list[Run]) -> str:
    """The buffers of the runs that draw (not fifo or firo), e.g. ``reservoir``."""
    return ", ".join(
        sorted({r.buffer or "?" for r in runs if r.buffer.lower() not in ONCE_BUFFERS})
    )


def _draws(duplicates: Mapping[Key, Sequence[object]], missing: list[Key], absent: int) -> str:
    """One line on a drawing buffer's records: what a list of them would say, counted."""
    most = max((len(v) for v in duplicates.values()), default=1)
    line = f"draws: {plural(len(duplicates), 'sample')} drawn more than once (up to {most} times)"
    if missing or absent:
        line += f"; {plural(len(missing), 'sample')} and {plural(absent, 'simulation')} never drawn"
    return line + ": draws, not violations"


def _missing(
    seen: dict[Key, list[tuple[int, str, int]]],
    simulations: int | None,
    steps: Steps,
    lines: list[str],
) -> tuple[list[Key], int]:
    """The samples expected and never counted (`Steps`: time steps 0..S-1 of each
    simulation seen, 0..its length-1 of each one `steps` names, or 0..its last step
    seen), and the number of simulations expected and never seen (said in `lines`)."""
    last: dict[int, int] = {}
    for s, t in seen:
        last[s] = max(last.get(s, t), t)
    sims = sorted(last)
    absent = 0
    if simulations is not None:
        absent = max(0, simulations - len(sims))
        lines.append(f"simulations: {len(sims)} seen, {simulations} expected")
        if absent:
            lines.append(
                f"MISSING: {plural(absent, 'simulation')} never trained on (seen: {spans(sims)})"
            )
    if steps is None:
        lines.append(
            "(no missing samples looked for: give --steps S, a lengths FILE or seen; "
            "--simulations N also counts simulations never seen)"
        )
        return [], absent
    if isinstance(steps, int):
        lengths = dict.fromkeys(sims, steps)
    elif steps == "seen":
        lengths = {s: t + 1 for s, t in last.items()}
        lines.append("steps: each simulation's up to its last step seen (--steps seen)")
    else:
        lengths = {s: t + 1 for s, t in last.items() if s not in steps} | dict(steps)
        if unnamed := sorted(set(sims) - set(steps)):
            lines.append(
                f"warning: {plural(len(unnamed), 'simulation')} seen that --steps does not name, "
                f"checked up to their last step seen: {spans(unnamed)}"
            )
    return [
        (s, t) for s in sorted(lengths) for t in range(lengths[s]) if (s, t) not in seen
    ], absent


def _steps(value: str) -> int | dict[int, int] | Literal["seen"]:
    """`--steps`'s value (`Steps`): a number, ``seen``, or a JSON file of lengths.

    Raises:
        argparse.ArgumentTypeError: none of them, naming the three forms.
    """
    if value == "seen":
        return "seen"
    try:
        number = int(value)
    except ValueError:
        pass
    else:
        if number < 1:  # (0 or less looks for nothing, and would say "missing: none")
            raise argparse.ArgumentTypeError(f"--steps {value}: give a number of steps >= 1")
        return number
    forms = 'a number S, "seen", or a JSON file {"SIMULATION_ID": STEPS, ...}'
    try:
        raw = json.loads(Path(value).read_text())
        lengths = {int(s): int(n) for s, n in raw.items()}
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise argparse.ArgumentTypeError(f"--steps {value!r}: expected {forms} ({exc})") from None
    if any(type(n) is not int or n < 0 for n in raw.values()):  # (not 1.5 read as 1)
        bad = next(n for n in raw.values() if type(n) is not int or n < 0)
        raise argparse.ArgumentTypeError(
            f"--steps {value!r}: the length {bad!r} is not a whole number of time steps >= 0"
        )
    return lengths


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m melissa_trainer.lineage",
        description="Check a SampleLedger: every (simulation, time step) trained once.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("check", help="apply the resume rule and check exactly-once")
    cmd.add_argument("output_dir", help="the training's output directory (or its lineage/)")
    cmd.add_argument("--simulations", type=int, help="the study's number of simulations")
    cmd.add_argument(
        "--steps",
        type=_steps,
        metavar="S|FILE|seen",
        help="how long each simulation is, to find missing samples: S, time steps 0..S-1 "
        'of every simulation; FILE, a JSON object {"SIMULATION_ID": STEPS, ...} of each '
        "simulation's length (simulations of different lengths; one it names and the "
        "ledger lacks is missing whole); seen, each simulation's steps 0..its last step "
        "seen (gaps only: a simulation's last steps, if never trained on, are not seen). "
        "Without it, only duplicates are checked",
    )
    args = parser.parse_args(argv)
    try:
        report = check(args.output_dir, args.simulations, args.steps)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(report)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
