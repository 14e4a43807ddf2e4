"""How a message names a `TrainingArguments` setting the user should change: in both
the ways they may have set it, as a keyword in Python (a script that builds
`TrainingArguments` itself has no command line) and as a flag of a script that parses
its arguments (`ArgumentParser`):

    >>> setting("resume_from_checkpoint", "latest")
    "resume_from_checkpoint='latest' (--resume_from_checkpoint latest on the command line)"
    >>> setting("overwrite_output_dir", True)
    'overwrite_output_dir=True (--overwrite_output_dir on the command line)'
    >>> setting("resume_from_checkpoint", "PATH", placeholder=True)
    'resume_from_checkpoint=PATH (--resume_from_checkpoint PATH on the command line)'

One phrase for every hint, so that no message tells a Python user to pass a flag.
Standard library only.
"""

from __future__ import annotations

__all__ = ["setting"]


def setting(field: str, value: object, *, placeholder: bool = False) -> str:
    """`field` set to `value`, said for Python and for the command line.

    Args:
        field: the `TrainingArguments` field.
        value: its value; ``True`` is the bare flag on the command line.
        placeholder: `value` is a word standing for one (``PATH``), shown unquoted.
    """
    if placeholder:
        python, flag = f"{field}={value}", f"--{field} {value}"
    elif value is True:
        python, flag = f"{field}=True", f"--{field}"
    else:
        python, flag = f"{field}={value!r}", f"--{field} {value}"
    return f"{python} ({flag} on the command line)"
