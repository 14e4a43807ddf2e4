"""A study whose trainer is paused (SIGSTOP, then SIGCONT) from outside: the driver of
`tests/launcher/test_pause.py` and of `benchmarks/pause.py`.

    python tests/scripts/paused_study.py OUT '{"simulations": 4, "steps": 12, ...}'

Options (a JSON object): ``simulations``, ``steps``, ``big`` (float32 values per step
of the solvers' large field), ``delay`` (seconds a solver waits after each step),
``job_limit``, ``launcher`` (`LauncherTuning` fields),
``client`` (the solvers' `ClientTuning` fields), ``sample_sleep`` (seconds of each
`process_sample`: slow training, so that a test can pause it while solvers stream).

Writes ``OUT/trained`` (one line ``simulation:step`` per sample trained on, as it is
taken), ``OUT/marks/{id}-{attempt}`` (each solver attempt's pid) and prints the
launcher's summary as its last stdout line (JSON). Exit status: the trainer's.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from melissa_trainer import OnlineTrainer, ReceiverConfig, StreamSource, Study, TrainingArguments
from melissa_trainer.launcher import Launcher, LauncherTuning, LocalBackend, UniformSampler

SOLVER = Path(__file__).with_name("pause_solver.py")


def main() -> None:
    out, options = Path(sys.argv[1]), json.loads(sys.argv[2])
    (out / "marks").mkdir(parents=True, exist_ok=True)
    trained = open(out / "trained", "a", buffering=1)  # noqa: SIM115 - the process's life
    pause = float(options.get("sample_sleep", 0.0))

    def process_sample(s: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
        trained.write(f"{int(s['simulation_id'])}:{int(s['time_step'])}\n")
        if pause:
            time.sleep(pause)
        return torch.from_numpy(s["x"]), torch.from_numpy(s["y"])

    env = {
        "SOLVER_STEPS": str(options["steps"]),
        "SOLVER_BIG": str(options["big"]),
        "SOLVER_DELAY": str(options.get("delay", 0.0)),
        "SOLVER_TUNING": json.dumps(options.get("client", {})),
        "SOLVER_MARKS": str(out / "marks"),
        "OMP_NUM_THREADS": "1",
    }
    launcher = Launcher(
        [sys.executable, str(SOLVER)],
        UniformSampler({"a": (0.0, 1.0)}, seed=0),
        options["simulations"],
        job_limit=options.get("job_limit", 2),
        backend=LocalBackend(),
        env=env,
        tuning=LauncherTuning(**options.get("launcher", {})),
    )
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    trainer = OnlineTrainer(
        model,
        TrainingArguments(
            output_dir=str(out / "run"),
            batch_size=1,
            buffer="fifo",  # each sample once: the exactly-once oracle
            buffer_size=4,
            watermark=1,
            logging_steps=1000,
            disable_progress_bar=True,
            report_to="none",
        ),
        torch.optim.SGD(model.parameters(), lr=1e-4),
        train_source=Study(launcher, StreamSource(ReceiverConfig())),
        process_sample=process_sample,
    )
    trainer.train()
    print(json.dumps(launcher.summary()), flush=True)


if __name__ == "__main__":
    main()
