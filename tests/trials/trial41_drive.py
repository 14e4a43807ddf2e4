"""User trial 41: serving under abuse. A serving trainer (`trial41_trainer.py`, external
mode, one sample a step, its lineage recorded) and two solvers started by hand that ask
a prediction before each step (`trial41_solver.py`, or the C `trial41_solver.c` built
as trial32_solver.c says, its path in $CSOLVER); the trainer is killed as MODE says, then
resumed with ``--resume_from_checkpoint latest``. Prints the requests answered and
failed per solver (kinds, p50 / p99 / max latency) and the exactly-once account: the
first run's steps up to the checkpoint resumed from, with the resumed run's, hold each
(simulation, time step) once.

    PYTHONPATH=. python tests/trials/trial41_drive.py MODE WORKDIR

MODE: early (SIGKILL $KILL_AT s after the start, 0.5), serve_file (SIGKILL as serve_0.json
appears), mid (SIGKILL at step $KILL_STEP, 75), save (SIGKILL held in the write of a save:
`--hold_save $HOLD`, 4: the second save), tmp (SIGKILL $KILL_DELAY s after a save's staging
directory appears; $HIDDEN for a big model), rank (two ranks, $TWO set: SIGKILL rank 1 at
step $KILL_STEP, then SIGTERM to the launcher), again_serve / again_save (SIGKILL at step
$KILL_STEP, then the resumed trainer SIGKILLed as it publishes its serve file, or held in
its first save, and a third run resumes), again_resend (SIGKILL at step $KILL_STEP, then
the resumed trainer SIGKILLed as soon as every solver says it followed it: their steps sent
again from their replay windows are then queued or on the wire, most of them not yet
trained on; a third run resumes and must get them again: $STEPS such that the solvers
still step when it starts, 1500 for Python's, 3000 for C's). Other settings: $STEPS (300)
per solver, $ASK_TIMEOUT (1.0 s), $SAVE_STEPS (50), $DOWN (3 s between the kill and the resume).
"""

from __future__ import annotations

import collections
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MODE, WORK = sys.argv[1], Path(sys.argv[2])
STEPS, SIMS = int(os.environ.get("STEPS", "300")), 2
TIMEOUT = float(os.environ.get("ASK_TIMEOUT", "1.0"))
CSOLVER, TWO = os.environ.get("CSOLVER"), bool(os.environ.get("TWO"))
RDV, OUT = WORK / "rdv", WORK / "out"
ENV = {**os.environ, "PYTHONPATH": str(HERE.parents[1]), "HOLD_MARK": str(WORK / "hold_mark"),
       "HOLD_RELEASE": str(WORK / "hold_release"), "OMP_NUM_THREADS": "1",
       "CUDA_VISIBLE_DEVICES": ""}  # fmt: skip
T0 = time.monotonic()


def say(*words: object) -> None:
    print(f"[{time.monotonic() - T0:7.2f}]", *words, flush=True)


def trainer(tag: str, *extra: str) -> subprocess.Popen[bytes]:
    launch = [sys.executable]
    if TWO:
        port = str(29500 + os.getpid() % 1000 + (tag == "resumed"))
        launch += ["-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                   "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                   "--main_process_port", port]  # fmt: skip
    cmd = [*launch, str(HERE / "trial41_trainer.py"), "--rendezvous", str(RDV), "--sims",
           str(SIMS), "--output_dir", str(OUT), "--batch_size", "1", "--buffer", "fifo",
           "--buffer_size", "64", "--watermark", "1", "--logging_steps", "1000", "--report_to",
           "none", "--disable_progress_bar", "--save_steps", os.environ.get("SAVE_STEPS", "50"),
           "--hidden", os.environ.get("HIDDEN", "64"), *extra]  # fmt: skip
    say("trainer", tag, " ".join(cmd[1:]))
    return subprocess.Popen(
        cmd, env={**ENV, "LINEAGE_LOG": str(WORK / f"lineage_{tag}.log")},
        stdout=(WORK / f"trainer_{tag}.log").open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def solver(sid: int) -> subprocess.Popen[bytes]:
    if CSOLVER:
        cmd = [CSOLVER, str(STEPS), str(TIMEOUT)]
    else:
        cmd = [sys.executable, str(HERE / "trial41_solver.py"), str(STEPS), str(TIMEOUT), "0.02"]
    return subprocess.Popen(
        cmd, env={**ENV, "MELISSA_TRAINER_SIMULATION_ID": str(sid),
                  "MELISSA_TRAINER_RENDEZVOUS": str(RDV)},
        stdout=(WORK / f"solver{sid}.log").open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def wait_for(ready: Callable[[], bool], limit: float, what: str) -> None:
    end = time.monotonic() + limit
    while not ready():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.005)


def kill(proc: subprocess.Popen[bytes]) -> int:
    os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()


def trained(tag: str) -> list[tuple[int, str]]:
    path = WORK / f"lineage_{tag}.log"
    rows = [line.split() for line in path.open()] if path.exists() else []
    return [(int(row[0]), key) for row in rows for key in row[1:]]


def rank_pid(rank: int) -> int:
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes()
            env = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if (
            b"trial41_trainer" in line
            and str(WORK).encode() in line
            and f"RANK={rank}".encode() in env
        ):
            return int(entry.name)
    raise SystemExit(f"no rank {rank}")


def serve_stamp() -> tuple[int, int] | None:
    try:
        st = (RDV / "serve_0.json").stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def left() -> list[str]:
    """The processes still running whose command line names WORK (not this one, nor
    what started it: a `timeout` wrapper names WORK too)."""
    found, mine = [], (os.getpid(), os.getppid())
    for entry in Path("/proc").iterdir():
        try:
            line = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if entry.name.isdigit() and int(entry.name) not in mine and str(WORK).encode() in line:
            found.append(line.replace(b"\0", b" ").decode(errors="replace")[:120])
    return found


def run_id() -> str | None:
    """The run id rank 0's rendezvous file names now (None: none readable)."""
    try:
        return json.loads((RDV / "rank_0.json").read_text()).get("run_id")
    except (OSError, ValueError):
        return None


def log(sid: int) -> str:
    """What solver `sid` printed so far."""
    return (WORK / f"solver{sid}.log").read_text(errors="replace")


def checkpoints() -> list[str]:
    root = OUT / "checkpoints"
    return sorted(p.name for p in root.iterdir()) if root.exists() else []


def main() -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    hold = ["--hold_save", os.environ.get("HOLD", "4")] if MODE == "save" else []
    first = trainer("first", *hold)
    solvers = [solver(sid) for sid in range(SIMS)]
    steps = int(os.environ.get("KILL_STEP", "75"))
    if MODE == "early":
        time.sleep(float(os.environ.get("KILL_AT", "0.5")))
    elif MODE == "serve_file":
        wait_for(lambda: (RDV / "serve_0.json").exists(), 300, "serve_0.json")
    elif MODE in ("mid", "rank", "again_serve", "again_save", "again_resend"):
        wait_for(lambda: len({s for s, _ in trained("first")}) >= steps, 600, f"step {steps}")
    elif MODE == "save":
        wait_for(lambda: (WORK / "hold_mark").exists(), 600, "the held save")
    elif MODE == "tmp":
        wait_for(lambda: any(n.startswith(".tmp-") for n in checkpoints()), 600, "a save")
        time.sleep(float(os.environ.get("KILL_DELAY", "0.1")))
    say("checkpoints before the kill:", checkpoints())
    if MODE == "rank":
        os.kill(rank_pid(1), signal.SIGKILL)
        say("SIGKILL rank 1")
        time.sleep(0.5)
        first.send_signal(signal.SIGTERM)
        try:
            say("SIGTERM to the launcher: exit", first.wait(120))
        except subprocess.TimeoutExpired:
            say("the launcher hung 120 s after SIGTERM: exit", kill(first))
    else:
        say("SIGKILL: exit", kill(first))
    say("checkpoints after the kill:", checkpoints())
    time.sleep(float(os.environ.get("DOWN", "3")))
    say("solvers alive:", [s.poll() is None for s in solvers])
    tags = ["first", "resumed"]
    if MODE.startswith("again"):
        stamp, first_run = serve_stamp(), run_id()
        held = ["--hold_save", "2"] if MODE == "again_save" else []
        second = trainer("resumed", "--resume_from_checkpoint", "latest", *held)
        if MODE == "again_serve":
            wait_for(lambda: serve_stamp() not in (stamp, None), 300, "a new serve_0.json")
        elif MODE == "again_resend":  # (each solver's follow said once its steps went)
            wait_for(lambda: run_id() not in (first_run, None), 300, "the resumed run's id")
            said = f"followed the restarted trainer (run {run_id()}"  # (Python's, C's words)
            wait_for(lambda: all(said in log(sid) for sid in range(SIMS)), 300, said)
        else:
            (WORK / "hold_mark").unlink(missing_ok=True)
            wait_for(lambda: (WORK / "hold_mark").exists(), 600, "the resumed run's save")
        say("checkpoints before the second kill:", checkpoints())
        say("SIGKILL the resumed trainer: exit", kill(second))
        if MODE == "again_resend":  # (what it took by then: its checkpoint's, then resent)
            took = trained("resumed")
            say(f"the resumed run trained {len(took)} sample(s) before its kill, the last "
                f"{took[-1:]}")  # fmt: skip
        say("checkpoints after the second kill:", checkpoints())
        time.sleep(float(os.environ.get("DOWN", "3")))
        tags.append("third")
    resumed = trainer(tags[-1], "--resume_from_checkpoint", "latest",
                      *(["--hold_save", "1000000"] if hold else []))  # fmt: skip
    for proc in (*solvers, resumed):
        try:
            proc.wait(900)
        except subprocess.TimeoutExpired:
            say("hung: killed", proc.args[:2], kill(proc))
    say(
        "solvers exit",
        [s.returncode for s in solvers],
        "; last trainer exit",
        resumed.returncode,
    )
    for sid in range(SIMS):
        took, kinds = [], collections.Counter()
        for line in (WORK / f"solver{sid}.log").open(errors="replace"):
            if not line.startswith("ASK"):
                continue
            parts = line.split(" ", 6)
            if CSOLVER:  # ("ASK t status version seconds @clock detail")
                took.append(float(parts[4]))
                detail = parts[6][:50] if len(parts) > 6 else ""
                kinds["ok" if parts[2] == "0" else f"status {parts[2]}: {detail}"] += 1
            else:
                took.append(float(parts[3]))
                kinds["ok" if parts[4].startswith("ok") else parts[4].split(":")[0]] += 1
        ms = np.asarray(took) * 1000
        say(f"sim{sid}: {len(ms)} requests {dict(kinds)}; p50 {np.percentile(ms, 50):.1f} ms, "
            f"p99 {np.percentile(ms, 99):.1f} ms, max {ms.max():.1f} ms (timeout "
            f"{TIMEOUT * 1000:.0f} ms)")  # fmt: skip
    # each run's steps up to the step the next run resumed from (its first step - 1)
    kept, cutoff, starts = [], float("inf"), []
    for tag in reversed(tags):
        rows = trained(tag)
        kept += [k for s, k in rows if s <= cutoff]
        if rows:
            cutoff = min(cutoff, rows[0][0] - 1)
            starts.append(rows[0][0] - 1)
    count = collections.Counter(kept)
    want = {f"{s}:{t}" for s in range(SIMS) for t in range(STEPS)}
    twice = sorted(k for k, n in count.items() if n > 1)
    say(f"runs began after steps {starts[::-1]}: duplicates {twice[:10]}, missing "
        f"{sorted(want - set(count))[:10]}, foreign {sorted(set(count) - want)[:10]}")  # fmt: skip
    say("processes left:", left())


if __name__ == "__main__":
    main()
