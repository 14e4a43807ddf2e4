"""The prepared GPU check (issue 42): every row of `benchmarks/gpu.py` and the Navier–Stokes
example at 256^2 for 2 minutes, in one command of at most 9 minutes (``--budget``).

    python benchmarks/gpu_check.py                  # writes under $OUT, else a temp dir
    python benchmarks/gpu_check.py --budget 300     # what fits in 5 minutes, in order
    python benchmarks/gpu_check.py --smoke          # the same steps, tiny, on the CPU

Stages, in this order (what was never measured on a GPU first), each given what is left
of ``--budget`` seconds (default 540) less what the later stages need at least:

1. ``gpu.py --json --cases fno,fno_busy,compile,compile_hand`` (5 rounds);
2. the example (`examples/navier_stokes/train.py`'s ``main``, through
   ``gpu_fno_busy.py --example-worker``) at 256^2 with its GPU flags
   (docs/how-to/neural-operator.md), training stopped after ``--example_seconds``
   (120), then its usual end: validation MSE against the mean field and persistence,
   the PNG, its summary, and the GPU's busy fraction over its training;
3. ``gpu.py --json --cases hand,stop_flag,device_buffer,staging,busy --rounds 3`` (the
   rows measured on an H100 before, fewer rounds to fit).

A stage out of time is stopped (SIGTERM to its process group, SIGKILL 15 s later); the
rows it printed so far (each case prints its row on stderr as it comes) are kept. A case
that fails does not stop its stage (``gpu.py --keep_going``: its traceback in the log).

The output folder gets three files, rewritten after each stage (`Outputs`: a run cut
short keeps what its finished stages wrote): ``summary.json`` (the card, driver, torch,
CPU, commit and `sources_digest`, which names the code where the copy has no .git; every row; the
example's figures; each stage's status and seconds), ``gpu_check.log``
(each stage's output) and ``navier_stokes_validation.png``; a table is printed last.
The stages import `melissa_trainer` from this checkout (the repository on PYTHONPATH)
and the packages it needs are checked first (on a GPU node without network, carry the
wheel of what is missing, pyzmq most often: docs/measured.md says how). Without a GPU
(and without ``--smoke``) it says so, names ``--smoke``, and exits 0 with no files, as
`gpu.py` does.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))  # report.py
sys.path.insert(1, str(REPO))  # melissa_trainer, where the checkout is not installed
from gpu_common import usable_cores  # noqa: E402
from report import print_rows  # noqa: E402

from melissa_trainer.common.json_output import to_json  # noqa: E402

#: gpu.py's cases, never measured on a GPU first, then those measured on an H100 before
NEW_CASES = ("fno", "fno_busy", "compile", "compile_hand")
OLD_CASES = ("hand", "stop_flag", "device_buffer", "staging", "busy")
#: seconds the example needs beyond its training (start-up, validation set, the end)
EXAMPLE_OVERHEAD_S = 90.0
#: the least seconds worth giving a stage of gpu.py
MIN_STAGE_S = 30.0


def example_flags(smoke: bool, output_dir: Path) -> list[str]:
    """The example's flags: its GPU command (the how-to's), with the simulations at once
    leaving the trainer 4 cores; under --smoke a tiny CPU run."""
    if smoke:
        sizes = ["--grid_size", "16", "--dt", "0.05", "--interval", "0.1", "--width", "8",
                 "--modes", "4", "--layers", "2", "--batch_size", "4", "--num_simulations",
                 "40", "--job_limit", "2", "--buffer_size", "64", "--watermark", "8",
                 "--eval_steps", "20"]  # fmt: skip
    else:
        sizes = ["--grid_size", "256", "--dt", "0.00625", "--width", "32", "--batch_size",
                 "16", "--num_simulations", "512", "--buffer_size", "5120", "--watermark",
                 "256", "--job_limit", str(max(1, usable_cores() - 4))]  # fmt: skip
    return [
        *sizes, "--mixed_precision", "bf16", "--buffer_device", "accelerator",
        "--num_validation", "2", "--save_at_end", "false", "--report_to", "none",
        "--disable_progress_bar", "--output_dir", str(output_dir),
    ]  # fmt: skip


#: the sources whose digest names the code measured (`sources_digest`)
SOURCE_GLOBS = ("melissa_trainer/**/*.py", "examples/*.py", "examples/navier_stokes/*.py",
                "examples/heat_pde/*.py", "benchmarks/*.py")  # fmt: skip


def sources_digest(root: Path = REPO) -> str:
    """SHA-256 of the package's, the examples' and the benchmarks' sources under `root`
    (each file's path relative to `root`, then its bytes, in path order): what names
    the code a GPU machine measured where its copy of the tree has no ``.git``."""
    digest = hashlib.sha256()
    files = sorted({p for pattern in SOURCE_GLOBS for p in root.glob(pattern) if p.is_file()})
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def environment(smoke: bool) -> dict[str, Any]:
    """What the figures were measured on."""
    import torch

    env: dict[str, Any] = {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_count": os.cpu_count(),
        "usable_cores": usable_cores(),
        "smoke": smoke,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
        "sources_sha256": sources_digest(),
    }
    try:
        import accelerate

        env["accelerate"] = accelerate.__version__
    except ImportError:
        pass
    for key, cmd in (
        ("nvidia_smi", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                        "--format=csv,noheader"]),
        ("commit", ["git", "-C", str(HERE), "rev-parse", "HEAD"]),
        ("cpu_model", ["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]),
    ):  # fmt: skip
        try:
            got = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
            env[key] = got.stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            env[key] = None
    return env


def run_stage(
    name: str,
    cmd: list[str],
    out: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    stdout_suffix: str = ".json",
) -> dict[str, Any]:
    """Run `cmd` in a process group of its own, stdout to ``NAME.json`` (or another
    `stdout_suffix`), stderr to ``NAME.log``; stopped at `timeout` s (SIGTERM to the
    group, SIGKILL 15 s later)."""
    print(f"[gpu_check] {name}: {' '.join(cmd)} (at most {timeout:.0f} s)", flush=True)
    start = time.perf_counter()
    with (
        open(out / f"{name}{stdout_suffix}", "w") as stdout,
        open(out / f"{name}.log", "w") as stderr,
    ):
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env, start_new_session=True)
        timed_out = False
        try:
            rc = proc.wait(timeout=max(timeout, 1.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                rc = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
    seconds = round(time.perf_counter() - start, 1)
    status = "timed out" if timed_out else "ok" if rc == 0 else f"failed ({rc})"
    print(f"[gpu_check] {name}: {status} after {seconds} s", flush=True)
    return {"stage": name, "rc": rc, "timed_out": timed_out, "seconds": seconds}


def stage_rows(out: Path, name: str) -> list[dict[str, Any]]:
    """The rows a gpu.py stage gave: its JSON line, else (cut short) the ``row:`` lines
    of its log."""
    text = (out / f"{name}.json").read_text().strip()
    if text:
        try:
            return list(json.loads(text.splitlines()[-1])["rows"])
        except (json.JSONDecodeError, KeyError, TypeError):
            pass
    rows = []
    for line in (out / f"{name}.log").read_text(errors="replace").splitlines():
        if line.startswith("row: "):
            rows.append(json.loads(line[len("row: ") :]))
    return rows


class Outputs:
    """What the check hands back, under `out`, rewritten after every stage (a command
    killed from outside keeps what was done): ``summary.json``, ``gpu_check.log`` (every
    stage's output, in order) and the example's PNG: 3 files, so that a folder collected
    after the run holds little. The stages work in `work`, a scratch folder."""

    def __init__(self, out: Path, work: Path, env: dict[str, Any]) -> None:
        self.out, self.work = out, work
        self.summary: dict[str, Any] = {"env": env, "stages": [], "rows": [], "example": None}
        self.save()

    def add(self, stage: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        self.summary["stages"].append(stage)
        self.summary["rows"] += rows
        name = stage["stage"]
        with open(self.out / "gpu_check.log", "a") as log:
            for path in sorted(self.work.glob(f"{name}.*")):
                log.write(f"===== {path.name} =====\n")
                log.write(path.read_text(errors="replace"))
                log.write("\n")
        example = self.work / "example" / "summary.json"
        if name == "example" and example.exists():
            self.summary["example"] = json.loads(example.read_text())
            png = self.work / "example" / "navier_stokes_validation.png"
            if png.exists():
                shutil.copy(png, self.out / png.name)
                self.summary["example"]["plot"] = str(self.out / png.name)
        self.save()

    def save(self) -> None:
        (self.out / "summary.json").write_text(to_json(self.summary, indent=1))


def preflight(child_env: dict[str, str]) -> str | None:
    """What the stages need and cannot find (None: all there), checked in a child
    process with the stages' environment, before any time is spent."""
    code = "import zmq, accelerate, safetensors, scipy, melissa_trainer"
    got = subprocess.run(
        [sys.executable, "-c", code], env=child_env, capture_output=True, text=True, timeout=120
    )
    if got.returncode == 0:
        return None
    return got.stderr.strip().splitlines()[-1] if got.stderr.strip() else f"exit {got.returncode}"


def main(argv: list[str] | None = None) -> int:
    # (the docstring's whole first paragraph: its first line alone stops mid-sentence)
    parser = argparse.ArgumentParser(description=" ".join((__doc__ or "").split("\n\n")[0].split()))
    parser.add_argument("--out", default=None, help="output folder (default $OUT, else a temp dir)")
    parser.add_argument("--budget", type=float, default=540.0, help="seconds for everything")
    parser.add_argument("--example_seconds", type=float, default=120.0)
    parser.add_argument("--smoke", action="store_true", help="every stage, tiny, on the CPU")
    parser.add_argument(
        "--cases",
        default=None,
        help=f"gpu.py's cases to run (default all: {','.join(NEW_CASES + OLD_CASES)})",
    )
    opts = parser.parse_args(argv)
    deadline = time.perf_counter() + opts.budget
    chosen = opts.cases.split(",") if opts.cases else [*NEW_CASES, *OLD_CASES]
    unknown = sorted(set(chosen) - set(NEW_CASES + OLD_CASES))
    if unknown:
        parser.error(f"--cases: unknown {', '.join(unknown)}")
    import torch

    if not opts.smoke and not torch.cuda.is_available():
        print(
            "no GPU is present: benchmarks/gpu_check.py measures nothing here (exit 0, no "
            "files). --smoke runs the same stages tiny on this CPU, about a minute and a "
            "half: a check that they run, whose figures mean nothing",
            file=sys.stderr,
        )
        return 0
    # the stages import melissa_trainer from this checkout, installed or not
    child_env = dict(os.environ)
    child_env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p
    )
    missing = preflight(child_env)
    if missing is not None:
        print(
            f"gpu_check: a package the stages need is missing ({missing}): install it, or on "
            "a machine without network carry its wheel (docs/measured.md, 'The FNO cases "
            "and the prepared check')",
            file=sys.stderr,
        )
        return 2
    out = Path(opts.out or os.environ.get("OUT") or tempfile.mkdtemp(prefix="mt-gpu-check-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.log").write_text("")
    work = Path(tempfile.mkdtemp(prefix="mt-gpu-check-work-"))
    outputs = Outputs(out, work, environment(opts.smoke))
    gpu = [sys.executable, str(HERE / "gpu.py"), "--json", "--keep_going"]
    gpu += ["--smoke"] if opts.smoke else []
    example_need = opts.example_seconds + (30.0 if opts.smoke else EXAMPLE_OVERHEAD_S)
    new = [c for c in NEW_CASES if c in chosen]
    if new:
        timeout = deadline - time.perf_counter() - example_need
        cmd = [*gpu, "--cases", ",".join(new)]
        outputs.add(
            run_stage("gpu_new", cmd, work, timeout, child_env), stage_rows(work, "gpu_new")
        )
    example_dir = work / "example"
    example_dir.mkdir()
    flags = example_flags(opts.smoke, example_dir)
    if importlib.util.find_spec("matplotlib") is None:
        flags.append("--no_plot")  # the example's PNG needs it; its figures do not
    worker = [sys.executable, str(HERE / "gpu_fno_busy.py"), "--example-worker",
              str(example_dir / "summary.json"), "--seconds", str(opts.example_seconds), "--",
              *flags]  # fmt: skip
    left = deadline - time.perf_counter()
    outputs.add(run_stage("example", worker, work, left, child_env, ".txt"), [])
    old = [c for c in OLD_CASES if c in chosen]
    left = deadline - time.perf_counter()
    if old and left >= MIN_STAGE_S:
        cmd = [*gpu, "--cases", ",".join(old), "--rounds", "1" if opts.smoke else "3"]
        stage = run_stage("gpu_old", cmd, work, left, child_env)
        outputs.add(stage, stage_rows(work, "gpu_old"))
    elif old:
        outputs.add({"stage": "gpu_old", "skipped": f"{left:.0f} s left of the budget"}, [])
    shutil.rmtree(work, ignore_errors=True)
    report(outputs.summary, out)
    stages = outputs.summary["stages"]
    return 0 if all(s.get("rc") == 0 for s in stages if "rc" in s) else 1


def report(summary: dict[str, Any], out: Path) -> None:
    """The table of rows, the example's figures and each stage's status."""
    env, example = summary["env"], summary["example"]
    print_rows(summary["rows"], f"benchmarks/gpu.py on {env['device']} ({env['nvidia_smi']})", 62)
    if example is not None:
        window = example["window"]
        print(
            f"\nexample {example['grid_size']}^2 ({example['model']}): validation MSE "
            f"{example['val_mse']:.4g} vs mean field {example['mean_field_mse']:.4g} and "
            f"persistence {example['persistence_mse']:.4g}; {example['steps']} steps, "
            f"{example['samples_received']} samples received, {window['seconds']} s of "
            f"training measured ({window['steps_per_s']} steps/s, GPU busy "
            f"{window['busy']}); plot {example['plot']}"
        )
    else:
        print("\nexample: no summary (see gpu_check.log)")
    for stage in summary["stages"]:
        print(f"stage {stage}")
    print(f"everything is under {out}")


if __name__ == "__main__":
    sys.exit(main())
