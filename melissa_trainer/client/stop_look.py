"""A rendezvous directory's ``rank_0.json`` as a `Predictor`'s lookups read it, again
only when it changed (`StopLook`).

A lookup that finds no serve file reads and parses that file at every look
(`predict_lookup.stop_text`, `stopped_story`): up to 4 looks a second per waiting
request, for as long as a trainer that a resume may follow stays stopped. A preempted
trainer's stop record (its receipts) is tens of KB; one look read and parsed it in
3 to 15 ms on a shared 2-core machine (1 000 to 100 000 simulations: 10 to 70 KB), up to
6 % of a core per waiting predictor, on a node whose simulations are its work. A
``stat`` (size, mtime_ns, inode) is microseconds. Imports the standard library and
`predict_lookup` only.
"""

from __future__ import annotations

import os
from pathlib import Path

from melissa_trainer.client.predict_lookup import stop_text, stopped_story

__all__ = ["StopLook"]

#: what `StopLook.look` returns: ``rank_0.json``'s text and its `stopped_story`
Look = tuple[str, "tuple[str, bool] | None"]


class StopLook:
    """``rank_0.json`` of one lookup's rendezvous directory: `look` returns what
    ``stop_text`` and ``stopped_story`` return on it (one implementation: those), read
    and parsed again only when the file's ``stat`` (size, mtime_ns, inode) or the
    story's other arguments changed since the last look. The ``stat`` comes before the
    read: a file replaced in between is read new under its old stat, and read again at
    the next look (never an old text kept under a new stat). No file: nothing kept."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._last: Look = ("", None)

    def look(
        self, directory: str | os.PathLike[str], run_id: str | None, why: str, served: bool
    ) -> Look:
        """(`stop_text` of `directory`, `stopped_story` of it with these arguments)."""
        try:
            st = os.stat(Path(directory) / "rank_0.json")
        except OSError:
            st = None
        key = None if st is None else (
            os.fspath(directory), st.st_size, st.st_mtime_ns, st.st_ino, run_id, why, served
        )  # fmt: skip
        if key is not None and key == self._key:
            return self._last
        text = stop_text(directory)
        self._key, self._last = key, (text, stopped_story(directory, run_id, why, served, text))
        return self._last
