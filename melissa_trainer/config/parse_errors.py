"""The words of `parser.ArgumentParser`'s errors: each problem of a parse named by the
flag or the ``--config`` file key it came from (`invalid_message`), and the unrecognized
arguments of a command line with a hint for each that has one (`unrecognized_message`:
a Hugging Face name and what replaces it, a typo's closest flag, a file of arguments
given without its flag, a stray value after a one-value flag).

Pure: strings in, a string out; the parser says them (argparse's error, exit status 2).
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from melissa_trainer.config.hf_names import closest_hint, flag_hint, stray_value_hint
from melissa_trainer.config.reading import ConfigError

__all__ = ["invalid_message", "unrecognized_message"]

#: the option a problem line is about: ``name=value ...`` or ``unknown key 'name' ...``
_PROBLEM_KEY = re.compile(r"(?:([A-Za-z_]\w*)=|unknown key '([^']*)')")


def invalid_message(
    exc: ValueError,
    cli: Mapping[str, Any],
    from_file: Mapping[str, Any],
    config_flag: str | None,
    config_path: str | None,
) -> str:
    """`exc`'s problems, each naming the flag (``argument --name: ...``, for a key of
    `cli`) or the file and key it came from (``in --<config_flag> <config_path>, ...``,
    for a key of `from_file`); problems that name no option are left as they are."""
    problems = exc.problems if isinstance(exc, ConfigError) else [str(exc)]
    lines = []
    for problem in problems:
        match = _PROBLEM_KEY.match(problem)
        key = match and (match.group(1) or match.group(2))
        if key in cli:
            lines.append(f"argument --{key}: {problem}")
        elif key in from_file and match and match.group(2):
            # an unknown key's problem names it already: "key 'X': unknown key 'X'"
            # said the name twice (hmelissa2)
            lines.append(f"in --{config_flag} {config_path}, {problem}")
        elif key in from_file:
            lines.append(f"in --{config_flag} {config_path}, key {key!r}: {problem}")
        else:
            lines.append(problem)
    return lines[0] if len(lines) == 1 else "\n  " + "\n  ".join(lines)


def unrecognized_message(
    remaining: Iterable[str],
    argv: Sequence[str],
    actions: Sequence[argparse.Action],
    config_flag: str | None,
) -> str:
    """argparse's "unrecognized arguments: ..." for `remaining` (the tokens of the
    command line `argv` that no flag took), with a hint for each that has one; `actions`:
    the parser's (its flags), `config_flag`: its flag that loads a file of arguments."""
    # the long flags' names, "--" off (closest_hint's names; a hyphen alias reads as its
    # underscore name)
    known: dict[str, set[str]] = {}  # (and each one's real spellings: `closest_hint`)
    for s in (s for a in actions for s in a.option_strings if s.startswith("--")):
        known.setdefault(s[2:].replace("-", "_"), set()).add(s[2:])
    one_value = [s for a in actions if a.nargs is None for s in a.option_strings]
    hints = []
    for token in remaining:
        if token.startswith("-"):
            flag = token.split("=", 1)[0]
            hf = flag_hint(flag)  # a Hugging Face name: what replaces it (`hf_names`)
            if hf is not None:
                hints.append(f"{flag} ({hf})")
                continue
            # (0.75: a typo of a flag scores about 0.9; difflib's default 0.6 named
            # --job_limit for --no_plot, which only shares letters with it)
            close = closest_hint(flag.lstrip("-"), known, True, 0.75, known)
            if close is not None:
                hints.append(f"{flag} ({close})")
        elif token.lower().endswith((".json", ".yaml", ".yml")):
            # HF scripts take `train.py args.json` (HfArgumentParser.parse_json_file)
            hints.append(f"{token} (a file of arguments is given as --{config_flag} {token})")
        elif (stray := stray_value_hint(token, argv, one_value)) is not None:
            hints.append(f"{token} ({stray})")  # --report_to tensorboard wandb
    message = f"unrecognized arguments: {' '.join(remaining)}"
    return message + ("; " + "; ".join(hints) if hints else "")
