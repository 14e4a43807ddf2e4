"""What a client says of the rendezvous directory it waits for when the path is not
one (`config.resolve_receivers`): the early warning (`waiting_notice`) and the final
`TimeoutError` both carry `missing_note`, the typo hint and the directory likely meant
(a user trial's final error had dropped the hint its warning gave). Imports the
standard library only (difflib when a guess is made): a client's start-up does not pay
for it (`benchmarks/client_startup.py`)."""

from __future__ import annotations

import os
from collections.abc import Callable

#: `config.ENV_RENDEZVOUS` (config imports this module: named here again, not imported)
ENV_RENDEZVOUS = "MELISSA_TRAINER_RENDEZVOUS"

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
    from melissa_trainer.common.words import closest_name  # (difflib: the rare path only)

    close = closest_name(rest[0], siblings) if rest else None
    if close is not None and close != rest[0]:
        note += f"; did you mean {os.path.join(base, close, *rest[1:])}?"
    return note


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
