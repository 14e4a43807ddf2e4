"""A simulation asking for predictions while the trainer is killed and resumed, on the
same number of ranks and on another (issue 47): real processes (a trainer under
`python`, then under `python` or `accelerate launch` with two ranks; a client process
with a `Predictor`), a real SIGKILL.

The client asks in a loop and records every outcome. It must catch what it gets while
no trainer serves (`PredictTimeout` from the dead trainer's endpoint, `PredictRefused`
while the new one starts), keep running, and be answered again after the resume by a
model whose version is at least the checkpoint's step. The test waits on events (files
the processes write, lines the client logs), never on sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from held_ports import held_port
from waiting import wait_until

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups and SIGKILL"),
]

ROOT = Path(__file__).parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "serving_resume.py"

CLIENT = r"""
import json, sys, threading, time
import numpy as np
from melissa_trainer.client import Predictor, PredictRefused, PredictTimeout

rendezvous, log = sys.argv[1], sys.argv[2]
done = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
with Predictor(0, rendezvous_dir=rendezvous) as p, open(log, "a") as out:
    while not done.is_set():
        try:
            outputs, version = p.predict({"x": np.ones(3, np.float32)}, timeout=0.5)
            record = {"version": version}
        except PredictTimeout:
            record = {"error": "timeout"}
        except PredictRefused as exc:
            record = {"error": exc.reason}
            done.wait(0.05)  # (a refusal comes at once: no busy loop)
        out.write(json.dumps(record) + "\n")
        out.flush()
"""


def records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    return [json.loads(line) for line in lines if line.endswith("}")]  # (whole lines)


def wait_for(what: str, ready: Callable[[], bool], procs: list[subprocess.Popen], s=120) -> None:
    """`wait_until`, and the output of a process that ended first (what it said)."""
    try:
        wait_until(ready, what, s, procs=procs)
    except AssertionError as failure:
        ended = [p for p in procs if p.poll() is not None and p.stdout]
        said = ended[0].stdout.read() if ended and ended[0].stdout else ""
        raise AssertionError(f"{failure}: {said}") from None


def start(run: Path, rendezvous: Path, ranks: int, *flags: str) -> subprocess.Popen:
    if ranks == 1:
        cmd = [sys.executable, str(SCRIPT)]
    else:
        accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
        cmd = [accelerate or "accelerate", "launch", "--multi_gpu", "--num_processes",
               str(ranks), "--num_machines", "1", "--mixed_precision", "no",
               "--dynamo_backend", "no", "--main_process_port", str(held_port()),
               str(SCRIPT)]  # fmt: skip
    cmd += ["--output_dir", str(run), "--batch_size", "4", "--buffer", "fifo",
            "--buffer_size", "64", "--watermark", "4", "--report_to", "none",
            "--disable_progress_bar", "--logging_steps", "1000", "--save_steps", "10",
            "--rendezvous", str(rendezvous), *flags]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    if ranks > 1:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process's whole group (accelerate's ranks too), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ranks", [1, 2], ids=["resume", "resize-1-to-2"])
def test_a_client_falls_back_through_a_kill_and_is_answered_after_the_resume(
    tmp_path: Path, ranks: int
) -> None:
    rendezvous, run, log = tmp_path / "rendezvous", tmp_path / "run", tmp_path / "client.jsonl"
    rendezvous.mkdir()
    run.mkdir()
    script = tmp_path / "client.py"
    script.write_text(CLIENT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    client = subprocess.Popen(
        [sys.executable, str(script), str(rendezvous), str(log)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        start_new_session=True,
    )  # fmt: skip
    first = start(run, rendezvous, 1, "--max_steps", "1000", "--hold", "save")
    second: subprocess.Popen | None = None
    out = ""
    try:
        # 1. the first trainer checkpointed and holds (its idle thread serves)
        saved_file = run / "saved.json"
        wait_for(
            "the checkpoint and an answer",
            lambda: saved_file.exists() and any("version" in r for r in records(log)),
            [first, client],
        )
        saved = json.loads(saved_file.read_text())["step"]
        # 2. SIGKILL: the client's requests fail, it catches that and goes on
        kill_group(first)
        killed_at = len(records(log))
        wait_for(
            "a failed request after the kill",
            lambda: any("error" in r for r in records(log)[killed_at:]),
            [client],
        )
        # 3. resumed (on `ranks` ranks): answered again, by a model of the checkpoint or later
        second = start(run, rendezvous, ranks, "--max_steps", str(saved + 10), "--hold",
                       "resumed", "--resume_from_checkpoint", "latest")  # fmt: skip
        resumed = run / "resumed_rank_0.json"
        wait_for(
            "an answer from the resumed trainer",
            lambda: resumed.exists() and any("version" in r for r in records(log)[killed_at:]),
            [second, client],
        )
        (run / "release").touch()
        out, _ = second.communicate(timeout=180)
        assert second.returncode == 0, out[-3000:]
    finally:
        for proc in (first, second):
            if proc is not None:
                kill_group(proc)
        if client.poll() is None:
            out, _ = client.communicate("", timeout=60)  # (stdin closed: it ends)
        code = client.returncode
        kill_group(client)
    assert code == 0, out[-3000:]  # it kept running through it all

    info = json.loads(resumed.read_text())
    assert info == {"resumed_at": saved, "world_size": ranks}
    everything = records(log)
    before, after = everything[:killed_at], everything[killed_at:]
    assert any("version" in r for r in before)
    # after the kill: failures the client caught, then answers of the resumed model
    first_answer = next(i for i, r in enumerate(after) if "version" in r)
    failures = after[:first_answer]
    assert failures and all("error" in r for r in failures)
    assert {r["error"] for r in failures} <= {"timeout", "not_serving"}
    assert "timeout" in {r["error"] for r in failures}  # (the dead trainer's endpoint)
    versions = [r["version"] for r in after if "version" in r]
    assert min(versions) >= saved
    assert max(versions) <= saved + 10
