"""A digest of a callable simulation's code, for the launcher's record of what its jobs
run (`study_change.program_of`): a resume whose callable kept its name but changed its
code is warned about as a changed command is (`study_change.program_change`).

What is digested, the first that applies:

* its source text (`inspect.getsource`): of the function, of the class of a callable
  instance, of the function a ``functools.partial`` or a bound method wraps (their
  bound arguments are not part of it: an object's repr may hold its address, which
  changes at every run). A lambda's source is its whole line. A change of a comment
  or of the layout is a change (the launcher cannot tell which edits matter);
* where the source cannot be read (defined in an interactive session, by ``exec``, a
  file gone): its code object, bytecode, names and constants (nested functions' too);
  the bytecode is the running Python version's: a resume under another version may
  be warned about with no edit;
* neither (a builtin, an object implemented in C): None, and nothing is compared.

Only the callable's own code: the functions it calls, the modules it imports and the
files it reads are not followed.

Pure; no I/O but the source read through `inspect` (linecache).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import types
from collections.abc import Callable
from typing import Any

__all__ = ["code_digest"]


def code_digest(simulation: Callable[..., object]) -> str | None:
    """A short sha256 digest (16 hex digits) of `simulation`'s code (module docstring),
    None where it has none to read."""
    target = _unwrap(simulation)
    try:
        text = inspect.getsource(target)
    except (OSError, TypeError):  # (no file, no source: a builtin, exec'd code)
        code = getattr(target, "__code__", None)
        if not isinstance(code, types.CodeType):
            return None
        text = _code_text(code)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _unwrap(simulation: Any) -> Any:
    """The function or class whose code `simulation` runs."""
    seen = 0
    while seen < 100:  # (a partial of a partial of ...; bounded against a cycle)
        seen += 1
        if isinstance(simulation, functools.partial):
            simulation = simulation.func
        elif isinstance(simulation, types.MethodType):
            simulation = simulation.__func__
        else:
            break
    if isinstance(simulation, types.FunctionType | type | types.BuiltinFunctionType):
        return simulation
    return type(simulation)  # a callable instance: its class holds its __call__


def _code_text(code: types.CodeType) -> str:
    """`code`'s bytecode, names and constants as text, without anything that varies
    from one run to the next (a frozenset's order with the hash seed, an address)."""
    consts = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            consts.append(f"code({_code_text(const)})")
        elif isinstance(const, frozenset):
            consts.append(f"frozenset({sorted(repr(c) for c in const)})")
        else:
            consts.append(repr(const))
    return f"{code.co_code.hex()}|{code.co_names}|{code.co_varnames}|{consts}"
