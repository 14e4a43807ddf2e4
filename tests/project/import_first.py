"""Each module of a package imported first, in one fresh interpreter (the package forgotten
before each), watched by the CPU time it spends rather than by the wall clock.

Why not a wall-clock bound: importing the ~400 modules of melissa_trainer first costs
about 25 CPU-s (each source compiled once, each module run afresh at each import); its
old bound of 420 s wall held only below a load average of about 15 on a 2-core machine
(CI and the shared development machines pass that). What the bound is for
is a hang, and a hang is one of two things, neither of which depends on the load:

* a loop at import: the module being imported has used more than `cpu_limit` CPU-s (the
  heaviest today, the first to load torch, takes about 2 CPU-s);
* a blocked import (a lock, a socket, a read of stdin, a child waited on): the interpreter
  has used no CPU time at all for `stall` s. A runnable process, however loaded the
  machine, gets some CPU time within seconds; only a blocked one gets none.

Either is reported as a failure of the module being imported (the modules after it are not
checked); the caller's pytest timeout is a last resort only.
"""

from __future__ import annotations

import json
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import psutil

IMPORT_EACH = """
import importlib, json, sys, traceback
package, names, blocked = sys.argv[1], json.loads(sys.argv[2]), set(json.loads(sys.argv[3]))
mark = sys.argv[4]  # the prefix of this script's own lines (a module may print at import)

class Block:  # refuses the top-level packages a promise excludes
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ImportError(f"{name} is blocked: this module promised not to need it")
        return None

sys.meta_path.insert(0, Block())

# Each module's code compiled once (keyed by its path and its source's bytes), executed
# afresh at each import: under PYTHONDONTWRITEBYTECODE (this project's machines) nothing
# cached it, and recompiling the ~70 modules each import runs was two thirds of the time
# (67 CPU-s of ~400 modules). Only the compiling is shared, never a module.
from importlib.machinery import SourceFileLoader
compiled, compile_source = {}, SourceFileLoader.source_to_code

def source_to_code(self, data, path, *, _optimize=-1):
    key = (path, data if isinstance(data, str) else bytes(data), _optimize)
    if key not in compiled:
        compiled[key] = compile_source(self, data, path, _optimize=_optimize)
    return compiled[key]

SourceFileLoader.source_to_code = source_to_code
for name in names:
    # Forget every module of the package: `name` is imported first, as in a fresh
    # interpreter (third-party modules stay loaded: they are not what is checked).
    for loaded in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[loaded]
    print(mark, "start", name, flush=True)  # the watcher's: which module runs now
    try:
        importlib.import_module(name)
    except BaseException:
        failure = json.dumps([name, traceback.format_exc(limit=-4)])
        print(mark, "failed", failure, flush=True)
print(mark, "done", flush=True)
"""

#: how often (s) the watcher reads the interpreter's CPU time
POLL = 0.2


def _pump(stream: IO[str], into: queue.Queue[str | None]) -> None:
    """Every line of `stream` into `into`, then None (its end)."""
    for line in stream:
        into.put(line)
    into.put(None)


def _drained(lines: queue.Queue[str | None]) -> list[str]:
    """The lines `lines` holds now, up to its end (None)."""
    got = []
    while not lines.empty() and (line := lines.get_nowait()) is not None:
        got.append(line)
    return got


def _cpu(process: psutil.Process) -> float | None:
    """The CPU-s `process` has used (user and system), None once it has ended."""
    try:
        times = process.cpu_times()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return None
    return float(times.user + times.system)


def import_each_first(
    names: list[str],
    package: str,
    blocked: tuple[str, ...] = (),
    path: Path | None = None,
    cpu_limit: float = 60.0,
    stall: float = 120.0,
) -> dict[str, str]:
    """Import each of `names` first, in one fresh interpreter with `blocked` top-level
    packages refused (and `path` first on its PYTHONPATH): the traceback of each that
    fails, by name. A module that takes more than `cpu_limit` CPU-s to import, or during
    whose import the interpreter uses no CPU time for `stall` s, is a failure too (a hang;
    the module docstring says why these bounds, not a wall-clock one); the interpreter is
    killed and the modules after it are not checked."""
    env = None
    if path is not None:
        env = {**os.environ, "PYTHONPATH": f"{path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    mark = f"import-first-{secrets.token_hex(8)}:"  # not a line a module could print
    args = [
        sys.executable,
        "-c",
        IMPORT_EACH,
        package,
        json.dumps(names),
        json.dumps(blocked),
        mark,
    ]
    child = subprocess.Popen(
        [*args, mark], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    assert child.stdout is not None and child.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()
    errors: queue.Queue[str | None] = queue.Queue()
    pumps = [
        threading.Thread(target=_pump, args=(child.stdout, lines), daemon=True),
        threading.Thread(target=_pump, args=(child.stderr, errors), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    watched = psutil.Process(child.pid)
    current, started_at = "(the interpreter's start, before the first module)", 0.0
    last_cpu, last_progress = 0.0, time.monotonic()
    failures: dict[str, str] = {}
    done = False
    hang: str | None = None
    try:
        while True:
            try:
                line = lines.get(timeout=POLL)
            except queue.Empty:
                line = ""
            if line is None:  # its stdout closed: it has ended (or is ending)
                break
            cpu = _cpu(watched)
            if line.startswith(mark):
                kind, _, rest = line[len(mark) :].strip().partition(" ")
                if kind == "start":
                    current, started_at = rest, last_cpu if cpu is None else cpu
                elif kind == "failed":
                    name, text = json.loads(rest)
                    failures[name] = text
                elif kind == "done":
                    done = True
            if cpu is None:
                continue
            now = time.monotonic()
            if (spent := cpu - started_at) > cpu_limit:
                hang = f"still importing after {spent:.1f} CPU-s (> {cpu_limit}): a loop?"
                break
            if cpu > last_cpu:
                last_cpu, last_progress = cpu, now
            elif now - last_progress > stall:
                hang = f"no CPU time used for {now - last_progress:.0f} s (> {stall}): blocked?"
                break
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for pump in pumps:  # (bounded: a process the import started may hold the pipes)
            pump.join(timeout=10)
    stderr = "".join(_drained(errors))
    if hang is not None:
        failures[current] = f"{hang}; the modules after it were not checked\n{stderr}"
        return failures
    assert child.returncode == 0 and done, (
        f"the importing interpreter ended with {child.returncode}:\n{stderr}"
    )
    return failures
