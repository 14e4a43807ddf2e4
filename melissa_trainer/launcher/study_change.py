"""What a resumed study may change, checked before anything of the checkpoint is used.

A study's checkpoint (the launcher's record, `StudyRecord.state_dict`) holds the
parameters of every simulation drawn, the sampler's position and the settings they came
from (`settings_of`: the number of simulations and the sampler's box). A run that
resumes it with other settings either continues it exactly or is refused by
`check_resume`, with an error naming the setting and the fix, before any simulation
is launched (a `Study` checks when the trainer hands it the checkpoint, before the
model is loaded):

* **The sampler, its parameters, their ranges and scales (linear, or "log"), its seed
  and options** (scramble, a
  Latin hypercube's batch, Breed's options) must not change: the parameters drawn so
  far came from them. Refused.
* **More simulations** (`n_simulations` grown): the new ones continue the sampler's
  sequence, so the study is the one a run started with the larger number would have
  drawn (uniform, Halton, Sobol', a callable, a list long enough, a Latin hypercube of
  an explicit `batch`, Breed with a fixed exploration share, the surrogate
  acquisition). Refused where the draws
  depend on the number itself: a Latin hypercube whose design size is
  `n_simulations` (``batch=None``, the examples' ``--sampler lhs``), Breed with a
  decaying exploration share (`exploration_final`, decaying over `n_simulations`) and
  Breed exploring a Latin hypercube of `n_simulations` points (`explorer` "lhs", or
  the default "auto" with more than 3 varying parameters), the density sampler (its
  draws are the optimised Latin hypercube of `n_simulations` points, warped);
  and refused once the checkpoint's stream had ended (every simulation finished: the
  buffers were closed, a resumed run cannot reopen them).
* **Fewer simulations** (`n_simulations` shrunk; the same samplers as for growing):
  the finished and abandoned simulations stay counted, and the study goes on with as
  many of the unfinished ones, lowest ids first, as the new number leaves room for.
  The others are cancelled (`past_the_end`): not launched again, not counted as
  failed, their ids not reused; the data of theirs already trained on stays in the
  model (it cannot be taken back).
* **The simulation command, and the launcher's `env`** (`program_of`: the command's
  tokens, placeholders unfilled, or a callable's name and a digest of its code,
  `program_code`; the variables of `env`, each
  value as a digest, so that no secret is written to the checkpoint) may change, with
  a warning (`program_change`) naming the change, old -> new, and what it means: the
  simulations that run again (interrupted) and those still to run use the new
  command, the finished ones were made with the old one, so the study mixes both.
  Warned, not refused, unlike the sampler's settings: those are refused because the
  launcher's record cannot continue from a sampler they no longer describe, and the
  old ones can always be given again; a command changes for reasons that change no
  result (the solver moved, another MPI launcher or host list on the requeue's node,
  a thread count in `env`), which the launcher cannot tell from a change of the
  physics (``--time_steps 30`` after 40), and a refusal would leave such a study no
  way to resume. States saved before the command was recorded have nothing to compare:
  no warning. Two absolute paths in one directory that name one file are one token
  (`_one_file`: ``VENV/bin/python`` and ``VENV/bin/python3``, the `sys.executable` of
  ``python train.py`` and of ``accelerate launch train.py``).

Functions on JSON states; no locks, and no I/O but `_one_file`'s look at two paths.
"""

from __future__ import annotations

import copy
import hashlib
import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from melissa_trainer.common.words import plural
from melissa_trainer.launcher.program_code import code_digest
from melissa_trainer.launcher.sampler_base import Sampler
from melissa_trainer.launcher.simulation_record import SavedStudy, read_saved

if TYPE_CHECKING:  # records imports this module
    from melissa_trainer.launcher.study_record import StudyRecord

__all__ = [
    "StudyChanged",
    "check_resume",
    "past_the_end",
    "program_change",
    "program_of",
    "settings_of",
]

#: statuses whose simulation has ended for the receivers (its data complete, or given up
#: and not replaced): a study with `n_simulations` of them had ended its stream
_ENDED = ("finished", "complete", "abandoned")
_NEW_STUDY = "or start a new study (a new output_dir, --output_dir in the examples)"


class StudyChanged(ValueError):
    """A checkpoint's study cannot be resumed with this launcher's settings."""


def settings_of(sampler: Sampler, n_simulations: int) -> dict[str, Any]:
    """The settings a study's record was drawn with (saved in its state)."""
    bounds = getattr(sampler, "bounds", None)
    box = None if bounds is None else {k: [float(lo), float(hi)] for k, (lo, hi) in bounds.items()}
    settings: dict[str, Any] = {"n_simulations": int(n_simulations), "bounds": box}
    log_scale = list(getattr(sampler, "log_scale", ()))
    return {**settings, "log_scale": log_scale} if log_scale else settings


def program_of(
    simulation: str | Sequence[str] | Callable[..., object], env: Mapping[str, str]
) -> dict[str, Any]:
    """What the launcher's jobs run, for its state (`program_change` compares them): the
    command's tokens (a str split as the launcher splits it), or ``callable
    MODULE.NAME`` and a digest of its code (`program_code.code_digest`, None where it
    has none to read); and `env`'s variables, each value as a sha256 digest (a
    checkpoint holds no secret passed in the environment, yet a changed value is
    seen)."""
    digests = {k: hashlib.sha256(v.encode()).hexdigest()[:16] for k, v in sorted(env.items())}
    if callable(simulation):
        name = getattr(simulation, "__qualname__", type(simulation).__qualname__)
        command = [f"callable {getattr(simulation, '__module__', '?')}.{name}"]
        return {"command": command, "code": code_digest(simulation), "env": digests}
    command = shlex.split(simulation) if isinstance(simulation, str) else list(simulation)
    return {"command": command, "env": digests}


def program_change(saved: Any, mine: Mapping[str, Any], finished: int) -> str | None:
    """The warning for a resume whose command or `env` (`program_of`) differs from the
    state's `saved` one (module docstring), None when they agree or the state recorded
    none (saved before it was); `finished` is the number of simulations the state had
    finished (made with the old command)."""
    if not isinstance(saved, Mapping):
        return None
    changes = []
    old, new = saved.get("command"), mine.get("command")
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        new = [o if o != n and _one_file(o, n) else n for o, n in zip(old, new, strict=True)]
    if isinstance(old, list) and isinstance(new, list) and old != new:
        changes.append(f"the simulation command changed: {_token_change(old, new)}")
    old_code, new_code = saved.get("code"), mine.get("code")
    codes = isinstance(old_code, str) and isinstance(new_code, str)
    if isinstance(new, list) and old == new and codes and old_code != new_code:
        changes.append(f"the code of the simulation {new[0]} changed")  # (its name's)
    old_env, new_env = saved.get("env"), mine.get("env")
    if isinstance(old_env, Mapping) and isinstance(new_env, Mapping) and old_env != new_env:
        added = sorted(set(new_env) - set(old_env))
        gone = sorted(set(old_env) - set(new_env))
        other = sorted(k for k in set(old_env) & set(new_env) if old_env[k] != new_env[k])
        said = [f"{what} {', '.join(keys)}" for what, keys in
                (("added", added), ("removed", gone), ("changed", other)) if keys]  # fmt: skip
        changes.append(f"the launcher's env changed ({'; '.join(said)})")
    if not changes:
        return None
    return (
        f"{' and '.join(changes)} since the checkpoint was written: the simulations that run "
        f"again (interrupted) and those still to run use the new one, the "
        f"{plural(finished, 'simulation')} finished so far were made with the old one, so "
        f"the study mixes both; if that is not meant, resume with the old command and env, "
        f"{_NEW_STUDY}"
    )


def _one_file(old: Any, new: Any) -> bool:
    """Whether two command tokens are absolute paths in one directory that name one
    existing file: ``VENV/bin/python`` and ``VENV/bin/python3``, which `python` and
    `accelerate launch` (its script's shebang) give as `sys.executable`, so that a resize
    between them is no change of command. One directory, not only one file: a venv's
    python is a link to its base interpreter's file yet runs another environment (its
    ``pyvenv.cfg`` is found from the path as given), so other directories stay a change."""
    if not isinstance(old, str) or not isinstance(new, str):
        return False
    if not os.path.isabs(old) or os.path.dirname(old) != os.path.dirname(new):
        return False
    try:
        return os.path.samefile(old, new)
    except OSError:  # (a path gone, or never a file: compared as words)
        return False


def _token_change(old: list[Any], new: list[Any]) -> str:
    """``OLD -> NEW``: the tokens between the commands' common start and end, with the
    token before them (the flag of a changed value) on both sides; ``TOKENS added`` (or
    ``removed``) when only one side has any: the token before them is then no flag of
    theirs (a trial's ``--worker`` appended read ``1 -> 1 --worker``, the value of the
    flag before it on both sides)."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    for mine, other, done in ((new, old, "added"), (old, new, "removed")):
        if len(other) - end == start:  # (nothing of `other` between: `mine` holds more)
            return f"{shlex.join(str(t) for t in mine[start : len(mine) - end])} {done}"
    start = max(0, start - 1)
    words = [shlex.join(str(t) for t in c[start : len(c) - end]) or "(nothing)" for c in (old, new)]
    return f"{words[0]} -> {words[1]}"


def check_resume(state: Mapping[str, Any], study: StudyRecord) -> SavedStudy:
    """Raise `StudyChanged` if the launcher state `state` cannot be resumed by `study`
    (not started: its sampler as built for this run, planned, and its `n_simulations`;
    see the module docstring). States saved before the settings were recorded are
    checked for what they hold. Changes nothing: the sampler's state is loaded into a
    copy. Returns the state read (`read_saved`: migrated, its records built), which
    `StudyRecord.load_saved` applies without reading it again.
    """
    n_simulations = study.n_simulations
    before = _check_settings(state, study.sampler, n_simulations)
    try:  # (the settings first: their messages name what changed)
        saved = read_saved(state, study.sampler.names)
        copy.deepcopy(study.sampler).load_state_dict(saved.sampler)
    except ValueError as exc:
        raise StudyChanged(f"cannot resume the study's launcher state: {exc}") from None
    if before is not None and n_simulations > before:  # (the records are valid now)
        ended = sum(1 for r in saved.records.values() if r.status in _ENDED)
        if ended >= before:
            raise StudyChanged(
                f"the study's n_simulations changed from {before} to {n_simulations}, but "
                f"the study of the checkpoint had ended (its {plural(ended, 'simulation')} "
                f"finished or abandoned, its stream closed): a study cannot grow after its end; "
                f"{_resume_with(before)}, {_NEW_STUDY}"
            )
    return saved


def _check_settings(state: Mapping[str, Any], sampler: Sampler, n_simulations: int) -> int | None:
    """Check what the state says of the study's settings; returns its `n_simulations`
    (None in a state saved before the settings were recorded)."""
    saved = state.get("sampler")
    if not isinstance(saved, Mapping):
        raise StudyChanged(f"invalid launcher state: no sampler state ({saved!r})")
    _same_sampler(saved, sampler)
    settings = state.get("settings")
    settings = settings if isinstance(settings, Mapping) else {}
    _same_bounds(settings.get("bounds"), sampler)
    if isinstance(settings.get("bounds"), Mapping):  # (no "log_scale" saved: all linear)
        _same_scale(settings.get("log_scale", []), sampler)
    before = settings.get("n_simulations")
    before = before if isinstance(before, int) and not isinstance(before, bool) else None
    _design_fits(saved, sampler, before, n_simulations)
    return before


def past_the_end(
    pending: list[int], counted: int, n_simulations: int
) -> tuple[list[int], list[int]]:
    """Split the unfinished simulations `pending` (ids) of a resumed study into those it
    goes on with, lowest ids first, and those cancelled: `counted` simulations (all the
    others but the failed ones) already fill part of its `n_simulations`."""
    room = max(0, n_simulations - counted)
    ordered = sorted(pending)
    return ordered[:room], ordered[room:]


def _same_sampler(saved: Mapping[str, Any], sampler: Sampler) -> None:
    checks = (
        ("kind", sampler.kind, "sampler", "the examples' --sampler"),
        ("names", list(sampler.names), "parameter names", None),
        ("seed", sampler.seed, "sampler seed", "the examples' --seed"),
    )
    for key, mine, what, flag in checks:
        old = saved.get(key)
        if old != mine:
            where = f" ({flag} {old})" if flag else ""
            raise StudyChanged(
                f"the study's {what} changed from {old!r} to {mine!r}: the simulations "
                f"drawn so far came from {what} {old!r}; resume with {what} {old!r}"
                f"{where}, {_NEW_STUDY}"
            )


def _same_bounds(saved: Any, sampler: Sampler) -> None:
    bounds = getattr(sampler, "bounds", None)
    if not isinstance(saved, Mapping) or bounds is None:
        return  # saved before they were recorded, or a sampler without a box
    changed = [
        f"{name} from {tuple(saved.get(name) or ())} to {tuple(bounds.get(name, ()))}"
        for name in sorted(set(saved) | set(bounds))
        if list(saved.get(name) or ()) != list(bounds.get(name, ()))
    ]
    if changed:
        raise StudyChanged(
            f"the study's parameter ranges changed ({'; '.join(changed)}): the simulations "
            f"drawn so far came from the old ranges; resume with them, {_NEW_STUDY}"
        )


def _same_scale(saved: Any, sampler: Sampler) -> None:
    mine = list(getattr(sampler, "log_scale", ()))
    if saved != mine:
        raise StudyChanged(
            f"the study's log-scale parameters changed from {saved!r} to {mine!r}: the "
            f"simulations drawn so far were drawn on the old scales; resume with the bounds "
            f'of the saved run (a log-scale parameter as (low, high, "log")), {_NEW_STUDY}'
        )


def _design_fits(
    saved: Mapping[str, Any], sampler: Sampler, before: int | None, n_simulations: int
) -> None:
    """A design whose size is the study's number of simulations cannot change size."""
    exploration = saved.get("exploration_state")
    mine: Any = None
    if sampler.kind == "lhs":
        key, what = "batch", "the LHS design depends on it (one hypercube of that many points)"
    elif sampler.kind == "breed" and getattr(sampler, "exploration_final", None) is not None:
        key, what = "decay_draws", "Breed's exploration share decays over that many draws"
    elif sampler.kind == "breed" and getattr(sampler, "design_size", None) is not None:
        # its exploration draws come from a Latin hypercube of the planned draws
        key, what = "design_size", "Breed explores a Latin hypercube of that many points"
        saved = exploration if isinstance(exploration, Mapping) else {}
        saved = {key: saved.get("size")}
    elif sampler.kind == "density":
        # every draw is a point of the optimised Latin hypercube of the planned draws
        # (warped): a resumed design of the old size would stream its points, then a
        # second hypercube's, and not be the design of the new number
        key, what = "design_size", "the density sampler draws a Latin hypercube of that many points"
        saved, mine = {key: _design_size(saved)}, _design_size(sampler.state_dict())
    else:
        return
    old = saved.get(key)
    mine = getattr(sampler, key, None) if mine is None else mine
    if old is None or mine is None or old == mine:
        return
    if before is not None and old == before and mine == n_simulations:  # planned by the launcher
        raise StudyChanged(
            f"the study's n_simulations changed from {before} to {n_simulations}, but "
            f"{what}: {_resume_with(before)}, {_NEW_STUDY}"
        )
    raise StudyChanged(
        f"the {sampler.kind} sampler's {key} changed from {old} to {mine} (None takes the "
        f"study's n_simulations): the simulations drawn so far came from {key}={old}; "
        f"resume with {key}={old}, {_NEW_STUDY}"
    )


def _resume_with(n_simulations: int) -> str:
    """The fix "resume with the old number", in the library's terms: the launcher's
    argument, not a command-line flag (a user's script has its own CLI; the examples'
    flag is named as theirs)."""
    return (
        f"resume with the study's n_simulations={n_simulations} "
        f"(Launcher(n_simulations={n_simulations}); the examples' --num_simulations)"
    )


def _design_size(state: Mapping[str, Any]) -> int | None:
    """The size of the Latin hypercube in a `DensitySampler`'s state (its
    ``design_state``), None when not planned or not recorded."""
    design = state.get("design_state")
    size = design.get("size") if isinstance(design, Mapping) else None
    return size if isinstance(size, int) and not isinstance(size, bool) else None
