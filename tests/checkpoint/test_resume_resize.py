"""A study interrupted on k training ranks and resumed from `latest` on m ranks (issue 33:
"Resume on any number of ranks") keeps every sample exactly once, whole runs, seen as a
user sees them: the heat example, gloo ranks under `accelerate launch` on CPU.

Each case runs the study on k ranks, interrupts it after a checkpoint (SIGKILL of every
process, or SIGTERM to one rank: the preemption path, which checkpoints the step every
rank stops at), resumes it with ``--resume_from_checkpoint latest`` on m ranks, and runs
it to its end. The oracle is built from the records of both runs
(`scripts/heat_resize.py`), not from the library's counters:

* **put once**: every ``(simulation, time step)`` of the study is put into a buffer
  exactly once across both runs: the first run's puts that its checkpoint holds (on each
  rank, the first ``put`` lines of its put log, ``put`` read from the checkpoint's
  ``rank_R/buffer.json``), then every put of the resumed run;
* **nothing lost or duplicated by the resize**: the samples held by the k ranks'
  buffers and pending batches in the checkpoint are those the m ranks hold right after
  loading it, each held by one rank once;
* **trained**: in the lineage of the final state (the first run's steps up to the
  checkpoint, then the resumed run's), FIFO, FIRO: every ``(simulation, time step)``
  trained exactly once; reservoir: every one at least once (a reservoir evicts only
  samples already drawn, and serves every undrawn one after its close), and the resumed
  run trains only samples it loaded or was put. On several ranks, but for those left
  untrained at the end: the ranks stop together when the first runs out of data
  (`melissa_trainer.core.stop_sync`), so what the others still hold then (a batch or so: their
  totals differ after a resize) is never trained. Those are read from each rank's
  buffer and pending batches after `train()` returned, and the test prints them;
* the summary's ``samples_received`` counts each sample once, and the study finished
  every simulation, each with one parameter vector (an adaptive study's too).
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from held_ports import held_port
from helpers import live, processes_with, sigkill_between_launches
from safetensors.numpy import load_file
from waiting import wait_until

from melissa_trainer.checkpoint.paths import latest_checkpoint

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc"),
    pytest.mark.e2e,
]

DRIVER = Path(__file__).parents[1] / "scripts" / "heat_resize.py"
TAMPERED_SOLVERS = Path(__file__).parents[1] / "scripts" / "tampered_solvers"  # a sitecustomize.py
SIMULATIONS, STEPS, BATCH, SAVE_STEPS = 6, 12, 4, 3
BUFFER_SIZE = 16  # per rank, FLAGS'
EXPECTED = {(s, t) for s in range(SIMULATIONS) for t in range(STEPS)}
FLAGS = [
    "--num_simulations", str(SIMULATIONS), "--time_steps", str(STEPS), "--grid_size", "6",
    "--job_limit", "2", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer_size", str(BUFFER_SIZE), "--watermark", "1", "--batch_size", str(BATCH),
    "--save_steps", str(SAVE_STEPS), "--logging_steps", "5", "--eval_steps", "none",
    "--disable_progress_bar", "--stop_sync_steps", "2", "--json",
]  # fmt: skip
Key = tuple[int, int]


@dataclass(frozen=True)
class Case:
    before: int  # ranks of the first run
    after: int  # ranks of the resumed run
    buffer: tuple[str, ...]
    signal: signal.Signals
    adaptive: bool = False

    @property
    def reservoir(self) -> bool:
        return self.buffer[1] == "reservoir"


BREED = ("--sampler", "breed", "--simulation_loss_steps", "4")
#: what a test waits for once its trainer is gone (local solvers die with their rank)
SOLVERS_GONE = "every solver's end (one outlived its trainer)"
CASES = {
    "1to2-fifo-sigkill": Case(1, 2, ("--buffer", "fifo"), signal.SIGKILL),
    "2to1-reservoir-sigkill": Case(
        2, 1, ("--buffer", "reservoir", "--sample_to_insert_ratio", "none"), signal.SIGKILL
    ),
    "2to3-firo-adaptive-sigterm": Case(2, 3, ("--buffer", "firo"), signal.SIGTERM, True),
    "3to2-reservoir-ratio-sigterm": Case(
        3, 2, ("--buffer", "reservoir", "--sample_to_insert_ratio", "2"), signal.SIGTERM
    ),
}


class Run:
    """One trainer run (`python`, or `accelerate launch` of `ranks` gloo processes) of
    the driver, with its records under `tmp` (the output directory is shared by the
    runs of a case, the records are the run's own)."""

    def __init__(
        self,
        tmp: Path,
        name: str,
        ranks: int,
        *extra: str,
        paced: bool,
        solver_step_sleep: float = 0.05,
    ) -> None:
        self.name, self.out, self.ranks = name, tmp / "out", ranks
        self.lineage, self.puts, self.dump = (
            tmp / f"{name}.lineage",
            tmp / f"{name}.put",
            tmp / f"{name}.load",
        )
        self.end = tmp / f"{name}.end"
        path = os.pathsep.join(filter(None, [str(TAMPERED_SOLVERS), os.environ.get("PYTHONPATH")]))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path,
               "CUDA_VISIBLE_DEVICES": "", "LINEAGE_LOG": str(self.lineage),
               "PUT_LOG": str(self.puts), "LOAD_DUMP": str(self.dump),
               "END_DUMP": str(self.end)}  # fmt: skip
        if paced:  # slow enough to be interrupted after a checkpoint, before the end
            env.update(STEP_SLEEP="0.1", SOLVER_STEP_SLEEP=str(solver_step_sleep))
        launch = [sys.executable]
        if ranks > 1:
            accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent))
            launch = [accelerate or "accelerate", "launch", "--multi_gpu",
                      "--num_processes", str(ranks), "--num_machines", "1",
                      "--mixed_precision", "no", "--dynamo_backend", "no",
                      "--main_process_port", str(held_port())]  # fmt: skip
        self.log = open(tmp / f"{name}.out", "w")  # noqa: SIM115 - closed in wait
        self.proc = subprocess.Popen(
            [*launch, str(DRIVER), *FLAGS, "--output_dir", str(self.out), *extra],
            cwd=tmp, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip

    def trainers(self) -> list[int]:
        """The pids of this run's trainer processes (the ranks, and `accelerate launch`),
        not its solvers (which inherit the environment: they are told by the rendezvous)."""
        solvers = set(processes_with(str(self.out / "rendezvous")))
        return sorted(set(processes_with(str(self.lineage))) - solvers)

    def kill(self) -> None:
        """SIGKILL every trainer process (the ranks are not in the launcher's group);
        the solvers are left to die with their rank, by themselves. Never while a solver
        is being launched (`sigkill_between_launches`): there the local backend's
        setpriv leaves a documented window, where a killed trainer leaves the solver
        running until its client gives up: what once failed this test)."""
        sigkill_between_launches(self.proc.pid, self.trainers())

    def terminate_one_rank(self) -> None:
        """SIGTERM to the last rank alone (the others hear of it at the next stop
        synchronisation), as a preemption that reaches one node first."""
        ranks = {}
        for pid in self.trainers():
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            rank = [int(v[5:]) for v in environ if v.startswith(b"RANK=")]
            if rank or self.ranks == 1:
                ranks[rank[0] if rank else 0] = pid
        assert len(ranks) == self.ranks, (ranks, self.output())
        os.kill(ranks[self.ranks - 1], signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.kill()  # every process of the run: none outlives the test
                self.proc.wait()
            self.log.close()

    def output(self) -> str:
        return Path(self.log.name).read_text()[-4000:]

    def steps(self) -> list[tuple[int, list[Key]]]:
        """(step, [(simulation, time step), ...]) of each step a rank trained; also the
        parameter vectors each simulation's samples had (`parameters`). Complete lines
        only: the last line may be being written when read (each line is one write, so
        a SIGKILL leaves none cut elsewhere)."""
        self.parameters: dict[int, set[str]] = {}
        if not self.lineage.exists():
            return []
        found = []
        for line in self.lineage.read_text().split("\n")[:-1]:
            step, *keys = line.split()
            if not keys:
                continue
            pairs = []
            for key in keys:
                sid, t, parameters = key.split(":")
                pairs.append((int(sid), int(t)))
                self.parameters.setdefault(int(sid), set()).add(parameters)
            found.append((int(step), pairs))
        return found

    def put_log(self, rank: int) -> list[Key]:
        path = Path(f"{self.puts}.{rank}")
        if not path.exists():
            return []
        return [parse(line) for line in path.read_text().split("\n")[:-1]]


def parse(key: str) -> Key:
    sid, t = key.split(":")
    return int(sid), int(t)


def held(directory: Path) -> list[Key]:
    """The samples a rank holds, from its buffer and pending-batch files (a checkpoint's
    ``rank_R/``, or the driver's dump after a load): one key per held sample."""
    keys: list[Key] = []
    for name, pattern in (("buffer", r"([sr]\d+)/"), ("pending", r"(b\d+/s\d+)/")):
        arrays = load_file(str(directory / f"{name}.safetensors"))
        for key, value in arrays.items():
            match = re.fullmatch(pattern + "simulation_id", key)
            if match:
                step = arrays[f"{match.group(1)}/time_step"]
                keys.append((int(value), int(step)))
    return keys


def untrained(directory: Path) -> set[Key]:
    """What a rank still held untrained (`held`): its pending batches and, in a
    reservoir, the samples never drawn; in a FIFO or FIRO, every sample."""
    meta = json.loads((directory / "buffer.json").read_text())
    keys = set(held(directory))
    if meta["kind"] == "reservoir":
        arrays = load_file(str(directory / "buffer.safetensors"))
        draws = meta["contents"]["draws"]
        keys -= {
            (int(arrays[f"s{slot}/simulation_id"]), int(arrays[f"s{slot}/time_step"]))
            for slot, n in enumerate(draws)
            if n > 0 and f"s{slot}/simulation_id" in arrays
        }
        pending = load_file(str(directory / "pending.safetensors"))
        keys |= {
            (int(v), int(pending[k.replace("simulation_id", "time_step")]))
            for k, v in pending.items()
            if k.endswith("/simulation_id")
        }
    return keys


def rank_dirs(root: Path) -> list[Path]:
    dirs = sorted(root.glob("rank_*"), key=lambda p: int(p.name.split("_")[1]))
    assert [int(p.name.split("_")[1]) for p in dirs] == list(range(len(dirs))), dirs
    return dirs


def checkpoints(out: Path) -> list[int]:
    root = out / "checkpoints"
    if not root.exists():
        return []
    names = (re.fullmatch(r"checkpoint-(\d+)", p.name) for p in root.iterdir())
    return sorted(int(m.group(1)) for m in names if m)


def interrupt(run: Run, case: Case) -> None:
    """After a checkpoint, while simulations still run (so that the resumed run receives
    again, routed to its own ranks): SIGKILL two steps after it, or SIGTERM."""

    def ready() -> bool:
        saved = checkpoints(run.out)
        trained = max((s for s, _ in run.steps()), default=0)
        return bool(saved) and trained >= saved[-1] + 2 and bool(processes_with(rendezvous))

    rendezvous = str(run.out / "rendezvous")
    try:
        wait_until(
            ready,
            lambda: f"the interruption: {run.output()}",
            150,
            procs=[run.proc],
            interval=0.05,
        )
        if case.signal == signal.SIGKILL:
            run.kill()
        else:
            run.terminate_one_rank()
        code = run.wait(90)
    finally:
        run.wait(10)
    if case.signal == signal.SIGTERM:  # `accelerate launch` exits 1 when a rank exits non-zero
        assert code == (143 if case.before == 1 else 1), run.output()
        assert re.search(r"preempted by SIGTERM at step \d+", run.output()), run.output()
    # local solvers die with their rank (PR_SET_PDEATHSIG); the bound is a hang's, not a
    # speed's
    wait_until(lambda: not processes_with(rendezvous), SOLVERS_GONE, 60, interval=0.1)


@pytest.mark.timeout(420)
@pytest.mark.parametrize("name", list(CASES))
def test_a_study_resumed_on_another_number_of_ranks_keeps_every_sample_once(
    tmp_path: Path, name: str
) -> None:
    case = CASES[name]
    extra = (*case.buffer, *(BREED if case.adaptive else ()))
    first = Run(tmp_path, "first", case.before, *extra, paced=True)
    interrupt(first, case)
    checkpoint = latest_checkpoint(first.out / "checkpoints")
    assert checkpoint is not None, first.output()
    saved = int(checkpoint.name.split("-")[1])
    if case.signal == signal.SIGTERM:
        assert f"preempted by SIGTERM at step {saved}" in first.output(), first.output()
    # aside: the resumed run's own checkpoints rotate it away (--max_to_keep)
    resumed_from = shutil.copytree(checkpoint, tmp_path / "resumed-from")
    second = Run(tmp_path, "second", case.after, *extra, "--resume_from_checkpoint", "latest",
                 paced=False)  # fmt: skip
    assert second.wait(300) == 0, second.output()
    check_resumed(name, case, first, second, resumed_from, saved)


def check_resumed(
    name: str,
    case: Case,
    first: Run,
    second: Run,
    resumed_from: Path,
    saved: int,
    capacity: int | None = None,
) -> None:
    """The oracle of the module docstring, from the records of `first` (interrupted
    after its checkpoint `resumed_from`, of step `saved`) and `second` (resumed from it,
    run to its end). `capacity`: the resumed run's --buffer_size (FLAGS' by default).
    Where the reservoir samples of the checkpoint do not fit the resumed ranks' buffers
    (3 ranks' onto 2 of the same size), those it loads fill them, and those it does not
    were all trained before the checkpoint (a full reservoir evicts only those, its
    never-drawn samples kept: `buffers.reshard`)."""
    if capacity is None:
        capacity = BUFFER_SIZE
    # said once, by the main rank, with no logging set up by the example
    ranks = f"{case.before} training rank{'' if case.before == 1 else 's'}"  # (1: singular)
    said = f"was written by {ranks}, this run has {case.after}: each rank"
    times = 1 if case.before != case.after else 0  # (nothing resharded on as many ranks)
    assert Path(second.log.name).read_text().count(said) == times, second.output()

    # put once: what the checkpoint holds of the first run's puts, then the second run's
    written = rank_dirs(resumed_from)
    assert len(written) == case.before
    put_before = []
    for rank, directory in enumerate(written):
        count = json.loads((directory / "buffer.json").read_text())["put"]
        log = first.put_log(rank)
        assert len(log) >= count, (rank, count, len(log))
        put_before += log[:count]
    put_after = [key for rank in range(case.after) for key in second.put_log(rank)]
    puts = collections.Counter(put_before + put_after)
    twice = sorted(k for k, n in puts.items() if n > 1)
    assert set(puts) == EXPECTED and not twice, (
        name, saved, twice[:10], sorted(EXPECTED - set(puts))[:10],
        sorted(set(puts) - EXPECTED)[:10],
    )  # fmt: skip

    # the resize: the k ranks' samples (buffers and untrained pending batches), each
    # held once by one of the m ranks (a reservoir's pending sample is also in its
    # buffer, drawn: one sample)
    loaded = rank_dirs(second.dump)
    assert len(loaded) == case.after, loaded
    in_checkpoint = collections.Counter(k for d in written for k in held(d))
    after_load = collections.Counter(k for d in loaded for k in held(d))
    dropped = set(in_checkpoint) - set(after_load)
    if case.reservoir and dropped:
        assert sum(after_load.values()) == capacity * case.after, (capacity, after_load)
        # only samples trained before the checkpoint (the first run's lineage): not its
        # pending batches' draws, which the resize gives back
        trained_before = {k for step, keys in first.steps() if step <= saved for k in keys}
        assert dropped <= trained_before, sorted(dropped - trained_before)[:10]
        print(f"{name}: {len(dropped)} samples trained before the checkpoint evicted to fit")
        dropped = set()
    assert not dropped and set(after_load) <= set(in_checkpoint), (
        name, sorted(dropped)[:10], sorted(set(after_load) - set(in_checkpoint))[:10],
    )  # fmt: skip
    assert max(after_load.values(), default=1) == 1, sorted(after_load.items())[-3:]
    if not case.reservoir:  # a FIFO's sample is held or pending, never both
        assert max(in_checkpoint.values(), default=1) == 1

    # trained: the lineage of the final state
    before = [keys for step, keys in first.steps() if step <= saved]
    after = [keys for step, keys in second.steps()]
    assert all(step > saved for step, _ in second.steps()), saved
    trained = collections.Counter(k for keys in before + after for k in keys)
    ended = rank_dirs(second.end)
    assert len(ended) == case.after, ended
    left = set().union(*(untrained(d) for d in ended))
    print(f"{name}: resumed from step {saved}; left untrained at the end: {sorted(left)}")
    if case.after == 1:  # one rank drains its buffer: nothing is left
        assert not left, sorted(left)
    if not case.reservoir:  # a FIFO's sample still held was never served
        assert not left & set(trained), sorted(left & set(trained))[:10]
    missing = EXPECTED - set(trained) - left
    assert not missing, (name, saved, sorted(missing)[:10])
    assert set(trained) <= EXPECTED, sorted(set(trained) - EXPECTED)[:10]
    if case.reservoir:
        resumed = {k for keys in after for k in keys}
        assert resumed <= set(after_load) | set(put_after), sorted(
            resumed - set(after_load) - set(put_after)
        )[:10]
    else:
        twice = sorted(k for k, n in trained.items() if n > 1)
        assert not twice, (name, saved, twice[:10])

    lines = [line for line in Path(second.log.name).read_text().splitlines() if line[:1] == "{"]
    summary = json.loads(lines[-1])
    assert summary["samples_received"] == len(EXPECTED), summary  # the counters, exact
    assert summary["study"]["finished"] == SIMULATIONS, summary
    vectors: dict[int, set[str]] = {}
    for run in (first, second):
        run.steps()
        for sid, seen in run.parameters.items():
            vectors.setdefault(sid, set()).update(seen)
    assert {s: v for s, v in vectors.items() if len(v) != 1} == {}  # one per simulation
    assert not processes_with(str(first.out / "rendezvous"))


@pytest.mark.timeout(420)
def test_a_resume_on_fewer_ranks_refused_for_buffer_size_succeeds_as_its_error_advises(
    tmp_path: Path,
) -> None:
    """2 -> 1 ranks with reservoirs full of never-drawn samples (training starts only
    once each rank's 32 are in, and is killed -9 after its first checkpoint): they do
    not fit one rank of the same --buffer_size, so the resume is refused, before
    anything is loaded or launched, by one error line naming the --buffer_size that
    fits; resumed with it (a user's report: any other size was refused, with advice that
    did not work), the study finishes and keeps every sample once (the oracle above)."""
    buffer = ("--buffer", "reservoir", "--sample_to_insert_ratio", "none", "--buffer_size", "32",
              "--watermark", "32", "--batch_size", "2")  # fmt: skip
    case = Case(2, 1, buffer, signal.SIGKILL)
    first = Run(tmp_path, "first", 2, *buffer, paced=True)
    try:
        wait_until(
            lambda: checkpoints(first.out),
            lambda: f"a checkpoint: {first.output()}",
            150,
            procs=[first.proc],
            interval=0.05,
        )
        first.kill()
    finally:
        first.wait(90)
    rendezvous = str(first.out / "rendezvous")
    wait_until(lambda: not processes_with(rendezvous), SOLVERS_GONE, 60, interval=0.1)
    checkpoint = latest_checkpoint(first.out / "checkpoints")
    assert checkpoint is not None, first.output()
    saved = int(checkpoint.name.split("-")[1])
    resumed_from = shutil.copytree(checkpoint, tmp_path / "resumed-from")
    # read here: the samples the two ranks never drew, what one rank of 32 cannot hold
    undrawn = 0
    for directory in rank_dirs(resumed_from):
        draws = json.loads((directory / "buffer.json").read_text())["contents"]["draws"]
        undrawn += sum(1 for n in draws if n == 0)
    assert undrawn > 32, f"the reservoirs hold {undrawn} never-drawn samples"

    refused = Run(tmp_path, "refused", 1, *buffer, "--resume_from_checkpoint", "latest",
                  paced=False)  # fmt: skip
    assert refused.wait(120) == 2, refused.output()
    text = Path(refused.log.name).read_text()
    assert "Traceback" not in text, text[-3000:]
    advice = r"; resume with --buffer_size (\d+) or more \(per rank; this run's is 32\), or on"
    advised = re.findall(advice, text)
    assert len(advised) == 1, text[-3000:]
    size = int(advised[0])
    held_in_checkpoint = sum(len(held(d)) for d in rank_dirs(resumed_from))
    assert undrawn <= size <= held_in_checkpoint, (undrawn, size, held_in_checkpoint)
    assert not refused.put_log(0) and not refused.dump.exists()  # nothing loaded, none put
    assert latest_checkpoint(first.out / "checkpoints") == checkpoint  # nothing written

    second = Run(tmp_path, "second", 1, *buffer, "--buffer_size", str(size),
                 "--resume_from_checkpoint", "latest", paced=False)  # fmt: skip
    assert second.wait(300) == 0, second.output()
    loaded = json.loads((second.dump / "rank_0" / "buffer.json").read_text())
    assert loaded["capacity"] == size
    check_resumed("2to1-undrawn-over-size", case, first, second, resumed_from, saved, size)


@pytest.mark.timeout(420)
def test_ranks_whose_launcher_is_killed_stop_with_a_checkpoint_and_the_study_resumes(
    tmp_path: Path,
) -> None:
    """kill -9 of `accelerate launch` (2 gloo ranks): the kill does not reach the ranks
    (torch's launcher starts each in a session of its own), which trained on for the
    rest of the study (a user's report), holding the output directory and their
    solvers. Now each rank sees its launcher gone (`preemption.PARENT_POLL`, 1 s) and
    stops as if preempted: every rank exits, with a checkpoint of the step they stopped
    at, the output directory's lock free, no solver left, long before the study could
    have ended (solvers of 3 s a step: about 2 minutes); the same command resumes, the
    study finishes, every sample kept once (the oracle of this module)."""
    buffer = ("--buffer", "fifo", "--save_steps", "1")
    case = Case(2, 2, buffer, signal.SIGKILL)
    first = Run(tmp_path, "first", 2, *buffer, paced=True, solver_step_sleep=3.0)
    ranks: list[int] = []
    try:
        rendezvous = str(first.out / "rendezvous")
        wait_until(
            lambda: checkpoints(first.out) and processes_with(rendezvous),
            lambda: f"a checkpoint, with simulations running: {first.output()}",
            150,
            procs=[first.proc],
            interval=0.05,
        )
        ranks = [pid for pid in first.trainers() if pid != first.proc.pid]
        assert len(ranks) == 2, (ranks, first.output())
        os.kill(first.proc.pid, signal.SIGKILL)  # the launcher alone
        first.proc.wait(30)
        # a bound on a hang (the rest of the study takes about 2 minutes), not a speed
        wait_until(
            lambda: not [pid for pid in ranks if live(pid)],
            lambda: f"the ranks' end, their launcher dead (alive: {[p for p in ranks if live(p)]})",
            60,
            interval=0.1,
        )
        wait_until(lambda: not processes_with(rendezvous), SOLVERS_GONE, 60, interval=0.1)
    finally:
        for pid in ranks + processes_with(str(first.out / "rendezvous")):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        first.wait(10)
    text = Path(first.log.name).read_text()
    gone = re.findall(r"the launcher \(accelerate launch, pid (\d+)\) is gone: stopping", text)
    assert gone == [str(first.proc.pid)] * 2, text[-3000:]  # each rank saw it
    stopped = re.findall(r"stopped at step (\d+) because the launcher \(accelerate", text)
    checkpoint = latest_checkpoint(first.out / "checkpoints")
    assert checkpoint is not None and stopped, text[-3000:]
    saved = int(checkpoint.name.split("-")[1])
    assert {int(n) for n in stopped} == {saved}, (stopped, saved)  # the stop's checkpoint
    with open(first.out / "trainer.lock", "a") as lock:  # free: no rank holds it
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(lock, fcntl.LOCK_UN)
    resumed_from = shutil.copytree(checkpoint, tmp_path / "resumed-from")

    second = Run(tmp_path, "second", 2, *buffer, "--resume_from_checkpoint", "latest",
                 paced=False)  # fmt: skip
    assert second.wait(300) == 0, second.output()
    assert any(second.put_log(r) for r in range(2)), "the first run had ended the study"
    check_resumed("2to2-launcher-killed", case, first, second, resumed_from, saved)
