"""The launcher's lines, cut into lines of at most 100 columns (`log_lines.cut`), read
back as one text each: written out here, the oracle of the tests that check their words
(a job's log: each next line starts with the prefix and two spaces; a WARNING: with two
spaces)."""

from __future__ import annotations

#: the prefix of the launcher's lines in a job's log (users grep for it)
PREFIX = "[melissa-trainer launcher] "
#: how a line that goes on from the one above starts
MORE = PREFIX + "  "
#: the columns of a terminal the lines are cut for
COLUMNS = 100


def said_in_log(text: str) -> list[str]:
    """The launcher's lines in a log's `text`, each joined with the lines that go on
    from it by a space (the prefix and time stamp of the first kept)."""
    said: list[str] = []
    for line in text.splitlines():
        if line.startswith(MORE) and said:
            said[-1] += " " + line.removeprefix(MORE)
        elif line.startswith(PREFIX):
            said.append(line)
    return said


def one_line(message: str) -> str:
    """A WARNING's message cut into lines (each next one starting with two spaces) as
    the one line it was."""
    return message.replace("\n  ", " ")


def too_long(text: str) -> list[str]:
    """The lines of `text` (a log, a WARNING) longer than `COLUMNS`."""
    return [line for line in text.splitlines() if len(line) > COLUMNS]
