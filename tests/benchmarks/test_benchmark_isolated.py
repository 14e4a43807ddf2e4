"""benchmarks/isolated.py: a pipeline in a fresh process forked from a fork server that
imported its modules once. Driven from a script of its own (the fork server is one per
process, and its preload is set when it starts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # every test here starts a process

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"

DRIVER = """
import json, os, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from isolated import run_isolated

def ok(x):
    print("to the log")
    return {"x": x, "pid": os.getpid(), "cwd": os.getcwd(), "env": os.environ.get("MARK"),
            "pythonpath": os.environ.get("PYTHONPATH"),
            "preloaded": "preloaded_mod" in sys.modules}

def fails():
    print("the log's last words", file=sys.stderr)
    raise ValueError("boom")

def dies():
    os._exit(3)

if __name__ == "__main__":
    out, log = {}, Path(sys.argv[2])
    Path(sys.argv[2], "preloaded_mod.py").write_text("")
    sys.path.insert(0, sys.argv[2])
    os.environ["MARK"] = "set after import"
    pre = ["preloaded_mod", "no_such_module"]
    out["ok"] = [run_isolated(ok, i, log=log / "ok.log", preload=pre) for i in range(2)]
    out["log"] = (log / "ok.log").read_text()
    for fn in (fails, dies):
        try:
            run_isolated(fn, log=log / f"{fn.__name__}.log", preload=pre)
        except RuntimeError as e:
            out[fn.__name__] = str(e)
    out["pid"], out["cwd"] = os.getpid(), os.getcwd()
    out["pythonpath"] = os.environ.get("PYTHONPATH")
    print(json.dumps(out))
"""


@pytest.mark.timeout(60)
def test_a_run_is_a_fresh_process_with_our_environment_and_failures_are_reported(
    tmp_path: Path,
) -> None:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    proc = subprocess.run(
        [sys.executable, str(script), str(BENCHMARKS), str(tmp_path)],
        capture_output=True, text=True, timeout=50, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    first, second = out["ok"]
    assert (first["x"], second["x"]) == (0, 1)
    assert len({first["pid"], second["pid"], out["pid"]}) == 3  # a fresh process each
    for run in (first, second):
        assert run["cwd"] == out["cwd"] and run["env"] == "set after import"
        # the server's PYTHONPATH (this driver's whole sys.path) is not the child's: the
        # child has the driver's own, whatever the environment pytest runs in
        assert run["pythonpath"] == out["pythonpath"]
        assert run["preloaded"]
    assert out["log"] == "to the log\n"  # the child's output went to its log, not ours
    assert proc.stdout.strip().count("\n") == 0  # nothing printed but the driver's JSON
    assert "ValueError: boom" in out["fails"] and "the log's last words" in out["fails"]
    assert "exit 3" in out["dies"]
    # the module the server could not import is named, once
    assert proc.stderr.count("could not import ['no_such_module']") == 1, proc.stderr
