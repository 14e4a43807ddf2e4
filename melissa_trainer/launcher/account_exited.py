"""The study account's words on simulations "exited" (exit 0, their data not all in when
the run stopped: rank 0's receiver behind at a SIGTERM or max_steps), which it does not
count as ended, and `id_ranges`, its way of listing ids.

The head's `besides_exited` points to the line of their own (`exited_line`): a user trial
stopped by SIGTERM on 2 ranks read "study account: none ended." above "2 simulations
exited with their data not all in", two processes having exited, and took the count for
wrong; it now reads "none ended with its data in (2 exited before their data was all in:
below)."
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["besides_exited", "exited_line", "id_ranges"]


def id_ranges(ids: Sequence[int], groups: int = 12) -> str:
    """Sorted ids as ranges: "0-11, 14, 16-18" (at most `groups` of them, then "...")."""
    out: list[str] = []
    ids = sorted(ids)
    i = 0
    while i < len(ids) and len(out) < groups:
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ", ".join(out) + (", ..." if i < len(ids) else "")


def besides_exited(count: int, more: bool = False) -> str:
    """The account head's words on the `count` simulations "exited", which it does not
    count as ended: "" when none, else a parenthesis that points to their line
    (`exited_line`), so that "none ended" or "2 ended" is not read as "no other
    simulation's process has exited". `more`: after a count of those ended ("2 ended
    (1 more exited ...)"), not after "none"."""
    if not count:
        return ""
    its = "its" if count == 1 else "their"
    return f" ({count}{' more' if more else ''} exited before {its} data was all in: below)"


def exited_line(ids: Sequence[int]) -> list[str]:
    """The account's line (none, or one) on `ids` "exited" (exit 0, data not all in at
    the stop): `reconcile` reruns each unless every receiver's checkpoint holds its data."""
    if not ids:
        return []
    noun, its, them = ("simulations", "their", "them") if ids[1:] else ("simulation", "its", "it")
    return [
        f"  {len(ids)} {noun} exited with {its} data not all in ({id_ranges(ids)}): a run "
        f"resumed from this checkpoint runs {them} again (unless it holds all {its} data)"
    ]
