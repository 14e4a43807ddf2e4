"""How long `OnlineTrainer.save_checkpoint` takes on a realistic checkpoint.

One trainer on the CPU with a full reservoir of 1024-float32 samples (100 MB with the
default ``--samples 25000``) and an MLP, trained a few steps, then saved ``--repeat``
times into its output directory (``max_to_keep=2``: rotation is part of the save).
Prints one JSON line: the median, minimum and maximum save time in seconds, and the
checkpoint's size.

Run it with one checkout, then another, interleaved, to compare two versions:

    for i in 1 2 3; do
        PYTHONPATH=/path/to/a python benchmarks/checkpoint_save.py --label a
        PYTHONPATH=/path/to/b python benchmarks/checkpoint_save.py --label b
    done
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from report import WORK_DIR_HELP, work_dir

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.common.json_output import to_json


def samples(n: int, dim: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    for _ in range(n):
        yield {"x": rng.standard_normal(dim).astype(np.float32)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=25_000, help="buffer size (samples)")
    parser.add_argument("--dim", type=int, default=1024, help="floats per sample")
    parser.add_argument("--hidden", type=int, default=1024, help="MLP width")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--label", default="")
    parser.add_argument("--dir", type=work_dir, default=None, help=WORK_DIR_HELP)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        args = TrainingArguments(
            output_dir=tmp, batch_size=8, buffer="reservoir", buffer_size=opts.samples,
            watermark=opts.samples, max_steps=2, save_at_end=False, max_to_keep=2,
            report_to="none", disable_progress_bar=True,
        )  # fmt: skip
        model = torch.nn.Sequential(
            torch.nn.Linear(opts.dim, opts.hidden), torch.nn.Tanh(),
            torch.nn.Linear(opts.hidden, opts.dim),
        )  # fmt: skip
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

        def xx(sample: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
            x = torch.from_numpy(sample["x"])
            return x, x

        trainer = OnlineTrainer(
            model, args, optimizer, train_source=samples(opts.samples, opts.dim),
            process_sample=xx,
        )  # fmt: skip
        trainer.train()
        times = []
        for _ in range(opts.repeat):
            start = time.perf_counter()
            path = trainer.save_checkpoint()
            times.append(time.perf_counter() - start)
        size = sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
    print(to_json({
        "label": opts.label, "median_s": round(statistics.median(times), 4),
        "min_s": round(min(times), 4), "max_s": round(max(times), 4), "mb": round(size / 1e6, 1),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
