"""Run an example's script as ``python script ARGV...`` would, in a process of its own,
and learn its exit status and which heavy modules it had imported when it ended: what a
fast refusal is checked by (test_example_fast_refusals.py for train.py,
test_worker_by_hand.py for solver.py's ``--worker``). What was imported is seen only in
a fresh process, and it is what is checked, not how long it took."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["run_as_main"]

#: runs argv[1] as ``__main__`` with the arguments after argv[2], then prints its exit
#: status and which of argv[2]'s comma-separated modules were loaded (a JSON line after
#: whatever the script printed)
_AS_MAIN = """
import json, runpy, sys
script, heavy = sys.argv[1], sys.argv[2].split(",")
sys.argv = [script, *sys.argv[3:]]
try:
    runpy.run_path(script, run_name="__main__")
    code = "ran on"
except SystemExit as exc:
    code = exc.code
loaded = [name for name in heavy if name in sys.modules]
print(json.dumps({"code": code, "loaded": loaded}))
"""


def run_as_main(
    script: Path, heavy: Sequence[str], argv: Sequence[str], env: Mapping[str, str]
) -> tuple[object, list[str], str]:
    """`script`'s exit status (its SystemExit's code; "ran on" if it returned), the
    modules of `heavy` it had imported when it ended, and what it wrote on stderr."""
    done = subprocess.run(
        [sys.executable, "-c", _AS_MAIN, str(script), ",".join(heavy), *argv],
        capture_output=True, text=True, timeout=100, env=dict(env),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    return said["code"], said["loaded"], done.stderr
