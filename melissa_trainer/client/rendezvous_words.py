"""What a client says of the rendezvous directory it waits for when the path is not
one (`config.resolve_receivers`): the early warning (`waiting_notice`) and the final
`TimeoutError` both carry `missing_note`, the typo hint and the directory likely meant
(a user trial's final error had dropped the hint its warning gave). Imports the
standard library only (difflib and the rendezvous reader when a guess is made): a
client's start-up does not pay for it (`benchmarks/client_startup.py`)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

#: `config.ENV_RENDEZVOUS` (config imports this module: named here again, not imported)
ENV_RENDEZVOUS = "MELISSA_TRAINER_RENDEZVOUS"
_RANK_FILE = re.compile(r"rank_(\d+)\.json")  # (`stream.endpoints`'s)

__all__ = ["missing_note", "waiting_notice"]


def missing_note(where: str | os.PathLike[str], source: str = ENV_RENDEZVOUS) -> str:
    """What a rendezvous path `where` that is not a directory adds to the client's words
    (`waiting_notice`'s warning and the final TimeoutError: a user trial's error had lost
    it): when not even its parent exists, that a typo in the variable is likely; and
    the directory likely meant, where one of its first missing component's siblings is
    close ("did you mean /w/out/rendezvous?"); "" when it is a directory. `source`:
    where the path was given (the variable, or an argument: a `Predictor`'s
    ``rendezvous_dir``)."""
    path = os.path.abspath(where)
    if os.path.isdir(path):
        return ""
    parent = os.path.dirname(path)
    note = (
        f"; its parent {parent} does not exist either: a typo in {source} is "
        f"likely, unless its trainer has not started yet (the trainer creates "
        f"{{output_dir}}/rendezvous, its files rank_<r>.json)"
        if not os.path.isdir(parent)
        else ""
    )
    rest: list[str] = []  # (the parts below `base`, the deepest ancestor that exists)
    base = path
    while not os.path.isdir(base) and os.path.dirname(base) != base:
        base, part = os.path.split(base)
        rest.insert(0, part)
    try:
        siblings = [e.name for e in os.scandir(base) if e.is_dir()]
    except OSError:  # (unreadable: no guess)
        siblings = []
    meant = _meant(base, rest, siblings) if rest else None
    if meant is not None and meant[0] != rest[0]:
        note += f"; did you mean {os.path.join(base, meant[0], *rest[1:])}?{meant[1]}"
    return note


#: what the directory meant adds when it holds rank files of no running trainer
STOPPED_RUN = " (a stopped run's: no trainer runs there now)"


def _meant(base: str, rest: list[str], siblings: list[str]) -> tuple[str, str] | None:
    """The sibling of `base` likely meant for ``rest[0]``, and what its path (it, then
    ``rest[1:]``) adds: of the close ones (`common.words.close_names`), the most
    recently modified path where a trainer runs (a client start's live look,
    `stream.endpoints.fetch_rendezvous`), ""; else the closest, `STOPPED_RUN` if its
    path holds rank files (the closest alone named an older run's directory, its
    trainer stopped, over a running one's nearly as close); None if none is close.
    The C client's words too (clients/c/src/missing_dir.c)."""
    from melissa_trainer.common.words import close_names  # (difflib: the rare path only)
    from melissa_trainer.stream.endpoints import fetch_rendezvous

    close = close_names(rest[0], siblings)
    if not close:
        return None
    running = []
    for name in close:
        path = os.path.join(base, name, *rest[1:])
        try:
            fetch_rendezvous(path, 0.0, alive_only=True)
            running.append((os.stat(path).st_mtime_ns, name))
        except (TimeoutError, OSError):  # (none runs there; or the path went meanwhile)
            continue
    if running:
        return max(running)[1], ""
    path = os.path.join(base, close[0], *rest[1:])
    try:
        ranks = any(_RANK_FILE.fullmatch(n) for n in os.listdir(path))
    except OSError:
        ranks = False
    return close[0], STOPPED_RUN if ranks else ""


def waiting_notice(where: str, timeout: float) -> Callable[[str], None]:
    """What a client still waiting for the rendezvous `where` says, once, early
    (`fetch_rendezvous`'s notice): a WARNING naming the path, the variable and the wait,
    and what `missing_note` adds (a typo likely, the directory likely meant). A solver
    may start before its trainer has created the directory, so it keeps waiting."""

    def notice(problem: str) -> None:
        import logging  # (a rare path: not at every simulation's start-up)

        path = os.path.abspath(where)
        missing = not os.path.isdir(path)
        logging.getLogger("melissa_trainer.client.client").warning(
            "%s=%s: %s%s; waiting up to %g s in all (ClientTuning.rendezvous_timeout) for "
            "the trainer to %s",
            ENV_RENDEZVOUS, path, problem, missing_note(where), timeout,
            "create it" if missing else "publish there",
        )  # fmt: skip

    return notice
