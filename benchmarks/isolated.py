"""Run a benchmark's pipeline in a process of its own, without importing torch again.

A benchmark that compares pipelines runs each in a fresh process, so that none inherits
the other's peak RSS, threads, allocator or Accelerate state. Started with
``subprocess.run([python, script, ...])`` each such process spends 3-5 s (2 cores)
importing torch and accelerate before it measures anything: the online-vs-offline
benchmark starts 9 of them even in its ``--quick`` form.

`run_isolated` forks the process instead from a multiprocessing *fork server*, which
imported the `preload` modules (torch, the project, the benchmark's pipelines) once, and
has run nothing else: it is single-threaded and holds no data, so the forked child
starts as a fresh interpreter would after its imports. Its peak RSS (``ru_maxrss``)
counts the imports, as a fresh process's would; its environment, working directory
and ``sys.path`` are this process's. (Name the modules: the fork server's own preload
of ``__main__`` does nothing on CPython 3.11, which passes it the main script's path
under a key it never reads, nor does it set the server's ``sys.path``: `run_isolated`
starts it with ``PYTHONPATH`` holding this process's path. A module it could not
preload is named in a warning: the children then import it themselves, slower.)

Contract: `fn` is a module-level function (the fork server imports it by name; a
lambda or closure is refused by pickle); its arguments travel pickled between our own
processes; its result must be JSON (it comes back as JSON text). The child's stdout and
stderr go to `log`, whose tail is in the `RuntimeError` raised if `fn` raises or the
child dies. Blocking; not thread-safe (one fork server per benchmark process).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import forkserver
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["run_isolated"]

#: how much of the child's log a failure quotes
LOG_TAIL = 4000
#: where and after what this module was imported: preloaded last in the fork server, it
#: tells a child which of the other modules the server had imported before it forked
_IMPORTED_BY = os.getpid()
_IMPORTED_AFTER = frozenset(sys.modules)


def run_isolated(
    fn: Callable[..., Any], *args: Any, log: Path, preload: Sequence[str] = (), **kwargs: Any
) -> Any:
    """``fn(*args, **kwargs)`` in a fresh process forked from the fork server; its
    result (JSON). `preload`: the modules the fork server imports when it starts (at the
    first call; later calls' are ignored). Raises `RuntimeError` with the child's
    traceback and log tail if it fails."""
    ctx = multiprocessing.get_context("forkserver")
    _start_server(preload)
    receiver, sender = ctx.Pipe(duplex=False)
    log.parent.mkdir(parents=True, exist_ok=True)
    child_args = (sender, fn, args, kwargs, str(log), dict(os.environ), tuple(preload))
    process = ctx.Process(target=_child, args=child_args)
    process.start()
    sender.close()  # ours: EOF on `receiver` once the child's copy is closed too
    try:
        status, text, missing = receiver.recv()
    except EOFError:  # died before it could answer (killed, os._exit, a crash)
        status, text, missing = "died", "", []
    finally:
        receiver.close()
        process.join()
    if missing and not _warned:
        _warned.append(True)
        print(f"warning: the fork server could not import {missing}: each child imports "
              "them itself", file=sys.stderr)  # fmt: skip
    if status != "ok" or process.exitcode != 0:
        tail = log.read_text(errors="replace")[-LOG_TAIL:] if log.exists() else ""
        raise RuntimeError(
            f"{getattr(fn, '__name__', fn)} failed (exit {process.exitcode}):\n{text}{tail}"
        )
    return json.loads(text)


_warned: list[bool] = []


def _start_server(preload: Sequence[str]) -> None:
    """Start the fork server, preloading `preload` with this process's ``sys.path``
    (no-op once it runs)."""
    multiprocessing.set_forkserver_preload([*preload, __name__])  # this module last
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
    try:
        forkserver.ensure_running()
    finally:
        if saved is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = saved


def _child(
    sender: Connection,
    fn: Callable[..., Any],
    args: Any,
    kwargs: Any,
    log: str,
    environ: dict[str, str],
    preload: tuple[str, ...],
) -> None:
    """In the child: the parent's environment, output to `log`, `fn` run, ("ok", JSON)
    or ("error", traceback) sent back with the preload modules that were missing."""
    preloaded = _IMPORTED_AFTER if os.getpid() != _IMPORTED_BY else frozenset()
    missing = [name for name in preload if name not in preloaded]
    os.environ.clear()  # the server's has PYTHONPATH: the child's is its parent's
    os.environ.update(environ)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)  # the file descriptors: a solver or C library writing there follows
    os.dup2(fd, 2)
    os.close(fd)
    try:
        result = json.dumps(fn(*args, **kwargs))
    except BaseException:
        sender.send(("error", traceback.format_exc(), missing))
        sender.close()
        sys.exit(1)
    sender.send(("ok", result, missing))
    sender.close()
