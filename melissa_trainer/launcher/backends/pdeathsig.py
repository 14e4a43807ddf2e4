"""The parent-death signal of a local job (`local`'s module docstring, "Dying with the
trainer", says why and what it costs): which program asks for it (`pdeathsig_wrapper`),
the job's argv behind it (`wrapped_argv`), and the lookup of the command that the
wrapper will exec (`check_executable`), so that a missing command is still a launch
error.

Contract: `pdeathsig_wrapper` is decided once per process (cached; it runs ``setpriv
--version`` once on Linux) and never raises; `wrapped_argv` keeps the pid, the exit
status and the killing signal the command's own (the wrapper execs it in place);
`check_executable` looks a program up as `subprocess.Popen` would. Every name still
imports from `melissa_trainer.launcher.backends.local`.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

__all__ = ["check_executable", "pdeathsig_wrapper", "wrapped_argv"]

#: The Python wrapper (without setpriv): argv[1] the trainer's pid, argv[2] the job's
#: LC_CTYPE ("=value", or "" when unset: the interpreter's locale coercion may have set
#: it in os.environ), argv[3:] the command.
_PYTHON_WRAPPER = f"""\
import ctypes, os, sys
prctl = ctypes.CDLL(None, use_errno=True).prctl
prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
prctl(1, {int(signal.SIGTERM)}, 0, 0, 0)  # PR_SET_PDEATHSIG
if os.getppid() != int(sys.argv[1]):  # the trainer died before the call
    os.kill(os.getpid(), {int(signal.SIGTERM)})
if sys.argv[2]:
    os.environ["LC_CTYPE"] = sys.argv[2][1:]
else:
    os.environ.pop("LC_CTYPE", None)
try:
    os.execvp(sys.argv[3], sys.argv[3:])
except OSError as exc:
    sys.stderr.write(f"cannot execute {{sys.argv[3]}}: {{exc}}\\n")
    os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
"""


@functools.cache
def pdeathsig_wrapper() -> str | None:
    """How this process's local jobs get their parent-death signal: the path of a
    setpriv that has ``--pdeathsig``, ``"python"`` (the Python wrapper), or None (off
    Linux, or no interpreter to run the wrapper). Decided once per process."""
    if not sys.platform.startswith("linux"):
        return None
    path = os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/bin", "/bin"])
    setpriv = shutil.which("setpriv", path=path)
    if setpriv is not None and _setpriv_works(setpriv):
        return setpriv
    return "python" if sys.executable else None


def _setpriv_works(setpriv: str) -> bool:
    """`setpriv` runs a command with ``--pdeathsig`` (util-linux >= 2.33)."""
    try:
        done = subprocess.run(
            [setpriv, "--pdeathsig", "TERM", "--", setpriv, "--version"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def wrapped_argv(argv: list[Any], env: Mapping[str, str], wrapper: str | None) -> list[Any]:
    """`argv` behind `wrapper` (see `pdeathsig_wrapper`), which sets the parent-death
    signal relative to this process and execs `argv`."""
    if wrapper is None:
        return argv
    if wrapper == "python":
        ctype = "=" + env["LC_CTYPE"] if "LC_CTYPE" in env else ""
        prefix = [sys.executable, "-I", "-S", "-c", _PYTHON_WRAPPER, str(os.getpid()), ctype]
        return [*prefix, *argv]
    return [wrapper, "--pdeathsig", "TERM", "--", *argv]


def check_executable(program: Any, env: Mapping[str, str], cwd: Any) -> None:
    """Raise FileNotFoundError or PermissionError unless `program` names an executable
    file, looked up as `subprocess.Popen` would: a name with a slash from `cwd`
    (None: ours), a bare name in the PATH of `env`."""
    name = os.fsdecode(program)
    if os.path.dirname(name):
        candidates = [name]
    else:
        candidates = [os.path.join(entry, name) for entry in os.get_exec_path(dict(env))]
    denied = False
    for candidate in candidates:
        path = os.path.join(os.fsdecode(cwd), candidate) if cwd is not None else candidate
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return
        denied = denied or os.path.exists(path)
    if denied:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)
