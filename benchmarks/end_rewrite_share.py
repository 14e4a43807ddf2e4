"""What the end-of-run rewrite of the last checkpoint spends on the files that did not
change (the model and the optimizer, Accelerate's ``save_state``).

A `Study` run writes its last checkpoint twice at the end: the periodic save of the
last step, then, the last simulations' ends having arrived after it, the save at the end
(`trainer.end_save`), at the same step. No training step ran in between: the model and
optimizer files are written again with the same bytes. This measures, for the heat
example's model and for the navier_stokes FNO (with their example's buffer sizes and
sample shapes, one process on the CPU), a save at the step of an existing checkpoint
(the rewrite): its whole time, the time of each part's write (``accelerate``: model,
optimizer, scheduler and RNG files), and the bytes of the model and optimizer files
against the checkpoint's. Prints one JSON line per case.

    python benchmarks/end_rewrite_share.py [--repeat 3] [--dir /scratch]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from report import WORK_DIR_HELP, work_dir

from melissa_trainer import OnlineTrainer, TrainingArguments
from melissa_trainer.checkpoint import registry
from melissa_trainer.common.json_output import to_json
from melissa_trainer.trainer import checkpointing

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from heat_pde.train import make_model as heat_model  # noqa: E402
from navier_stokes.models import FNO  # noqa: E402


def samples(n: int, shapes: dict[str, tuple[int, ...]]) -> Iterator[dict[str, np.ndarray]]:
    """`n` random samples of float32 fields of `shapes`."""
    rng = np.random.default_rng(0)
    for _ in range(n):
        yield {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}


def case(
    name: str,
    model: torch.nn.Module,
    shapes: dict[str, tuple[int, ...]],
    buffer_size: int,
    step: Callable[[dict[str, Any]], Any],
    opts: argparse.Namespace,
) -> dict[str, Any]:
    """Train 2 steps, save, then save `opts.repeat` times more at the same step."""
    timings: dict[str, list[float]] = {}
    parts = registry.parts

    def timed_parts(trainer: Any) -> list[registry.Part]:
        def timed(part: registry.Part) -> registry.Part:
            if part.save is None:
                return part
            save = part.save

            def run(path: Path) -> None:
                start = time.perf_counter()
                save(path)
                timings.setdefault(part.name, []).append(time.perf_counter() - start)

            return replace(part, save=run)

        return [timed(part) for part in parts(trainer)]

    sync_and_hash = checkpointing._sync_and_hash

    def timed_sync(*args: Any) -> None:
        start = time.perf_counter()
        sync_and_hash(*args)
        timings.setdefault("fsync_and_hash", []).append(time.perf_counter() - start)

    with tempfile.TemporaryDirectory(dir=opts.dir) as tmp:
        args = TrainingArguments(
            output_dir=tmp, batch_size=8, buffer="reservoir", buffer_size=buffer_size,
            watermark=buffer_size, max_steps=2, save_at_end=False, max_to_keep=2,
            report_to="none", disable_progress_bar=True,
        )  # fmt: skip
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        trainer = OnlineTrainer(
            model, args, optimizer, train_source=samples(buffer_size, shapes),
            process_sample=step,
        )  # fmt: skip
        trainer.train()
        path = trainer.save_checkpoint()  # the periodic save of the last step
        registry.parts = timed_parts  # type: ignore[assignment]
        checkpointing._sync_and_hash = timed_sync  # type: ignore[assignment]
        try:
            totals = []
            for _ in range(opts.repeat):  # the rewrite at the end, at the same step
                start = time.perf_counter()
                path = trainer.save_checkpoint()
                totals.append(time.perf_counter() - start)
        finally:
            registry.parts = parts  # type: ignore[assignment]
            checkpointing._sync_and_hash = sync_and_hash  # type: ignore[assignment]
        assert path is not None
        files = [p for p in Path(path).rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        unchanged = sum(
            p.stat().st_size
            for p in files
            if p.name.startswith(("model", "optimizer")) and p.parent == Path(path)
        )
    median = statistics.median
    return {
        "case": name,
        "parameters": sum(p.numel() for p in model.parameters()),
        "rewrite_s": round(median(totals), 4),
        "accelerate_write_s": round(median(timings["accelerate"]), 4),
        "fsync_and_hash_s": round(median(timings.pop("fsync_and_hash")), 4),
        "parts_write_s": {k: round(median(v), 4) for k, v in sorted(timings.items())},
        "model_optimizer_mb": round(unchanged / 1e6, 2),
        "checkpoint_mb": round(size / 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", type=work_dir, default=None, help=WORK_DIR_HELP)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    grid = 32  # heat: --grid_size 32, --hidden 256, buffer_size 4000; inputs: 5 parameters and t
    print(to_json(case(
        "heat MLP", heat_model(grid, 256), {"x": (6,), "y": (grid * grid,)}, 4000,
        lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])), opts,
    )))  # fmt: skip
    for width, n in ((16, 64), (32, 64)):  # the CPU default; --width 32 (the GPU runs')
        print(to_json(case(
            f"navier_stokes FNO width {width}", FNO(4, width, 12, 4),
            {"x": (4, n, n), "y": (1, n, n)}, 480,
            lambda s: (torch.from_numpy(s["x"]), torch.from_numpy(s["y"])), opts,
        )))  # fmt: skip


if __name__ == "__main__":
    main()
