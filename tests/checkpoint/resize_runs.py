"""The runs of the resize tests (tests/checkpoint/test_resume_resize.py,
test_resume_launcher_killed.py): the heat example's study under
tests/scripts/heat_resize.py (`Run`: `python`, or `accelerate launch` of gloo ranks on
CPU), its flags and sizes, its records read back, and the checkpoints it wrote."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from held_ports import held_port
from process_tree import processes_with, sigkill_between_launches

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


#: what a test waits for once its trainer is gone (local solvers die with their rank)
SOLVERS_GONE = "every solver's end (one outlived its trainer)"


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


def checkpoints(out: Path) -> list[int]:
    root = out / "checkpoints"
    if not root.exists():
        return []
    names = (re.fullmatch(r"checkpoint-(\d+)", p.name) for p in root.iterdir())
    return sorted(int(m.group(1)) for m in names if m)
