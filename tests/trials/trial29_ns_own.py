"""A user's own online FNO script (trial 29): written from the docs only.

python tests/trials/trial29_ns_own.py --output_dir OUT [TrainingArguments flags]
    [--n_sims 8 --grid 32 --steps 5 --model_kind plain|dict|tuple|loss_in_model
     --sched none|onecycle|cosine --total_steps_guess N --ledger]
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
from navier_stokes.train import (  # noqa: E402
    CHANNELS,
    PARAMETER_BOUNDS,
    SOLVER,
    FlowArgs,
    make_process_sample,
    validation_set,
)

from melissa_trainer import (  # noqa: E402
    ArgumentParser,
    Hook,
    Launcher,
    OnlineTrainer,
    ReceiverConfig,
    StreamSource,
    Study,
    TrainingArguments,
    make_sampler,
    refusals_end_the_program,
)

VIEW_ONCE = os.environ.get("TRIAL29_VIEW_ONCE") == "1"


@dataclasses.dataclass
class Mine:
    n_sims: int = 8
    grid: int = 32
    steps: int = 5
    model_kind: str = "plain"
    sched: str = "none"
    total_steps_guess: int = 0
    ledger: bool = False
    lr: float = 3e-3


class Spectral(torch.nn.Module):
    def __init__(self, width: int, modes: int) -> None:
        super().__init__()
        self.modes = modes
        scale = 1 / (width * width)
        # complex weights stored as (re, im) pairs, as the how-to advises
        self.w = torch.nn.Parameter(scale * torch.randn(2, width, width, modes, modes, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, n, _ = x.shape
        xf = torch.fft.rfft2(x.float())
        out = torch.zeros(b, c, n, n // 2 + 1, dtype=torch.cfloat, device=x.device)
        m = self.modes
        if VIEW_ONCE:  # one complex view indexed twice: inductor fails on its gradient
            w = torch.view_as_complex(self.w)
            w0, w1 = w[0], w[1]
        else:  # a complex view per use
            w0, w1 = torch.view_as_complex(self.w[0]), torch.view_as_complex(self.w[1])
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :m, :m], w0)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -m:, :m], w1)
        return torch.fft.irfft2(out, s=(n, n)).to(x.dtype)


class TinyFNO(torch.nn.Module):
    def __init__(self, kind: str = "plain", width: int = 12, modes: int = 6) -> None:
        super().__init__()
        self.kind = kind
        self.lift = torch.nn.Conv2d(CHANNELS, width, 1)
        self.spec = torch.nn.ModuleList([Spectral(width, modes) for _ in range(2)])
        self.point = torch.nn.ModuleList([torch.nn.Conv2d(width, width, 1) for _ in range(2)])
        self.proj = torch.nn.Conv2d(width, 1, 1)

    def forward(self, x: torch.Tensor, targets: torch.Tensor | None = None):
        h = self.lift(x)
        for s, p in zip(self.spec, self.point, strict=True):
            h = torch.nn.functional.gelu(s(h) + p(h))
        y = self.proj(h)
        if self.kind == "dict":
            return {"prediction": y}
        if self.kind == "tuple":
            return (y, h)
        return y


class RelL2(Hook):
    """Validation metric of my own: relative L2 over the held-out fields."""

    eval_keys = frozenset({"rel_l2"})

    def __init__(self, process_sample) -> None:
        self.process_sample = process_sample

    def eval_figures(self, trainer):
        errs = []
        model = trainer.model
        for s in trainer.eval_dataset:
            x, y = self.process_sample(s)
            p = model(x[None].to(trainer.accelerator.device))
            if isinstance(p, dict):
                p = p["prediction"]
            if isinstance(p, tuple):
                p = p[0]
            p = p.float().cpu()[0]
            errs.append(float(torch.linalg.vector_norm(p - y) / torch.linalg.vector_norm(y)))
        return {"rel_l2": float(np.mean(errs))}


def main() -> None:
    args, mine = ArgumentParser(TrainingArguments, Mine).parse_args_into_dataclasses()
    flow = FlowArgs(grid_size=mine.grid, time_steps=mine.steps, dt=0.05, num_validation=2)
    command = [
        sys.executable,
        str(SOLVER),
        "--grid_size",
        str(mine.grid),
        "--time_steps",
        str(mine.steps),
        "--dt",
        "0.05",
    ]
    launcher = Launcher(
        command,
        make_sampler("lhs", PARAMETER_BOUNDS, seed=0),
        n_simulations=mine.n_sims,
        job_limit=2,
    )
    n = mine.grid
    stream = StreamSource(
        ReceiverConfig(fields={"vorticity": ((n, n), "float32"), "initial": ((n, n), "float32")})
    )
    process_sample = make_process_sample(mine.steps)
    torch.manual_seed(args.seed)
    model = TinyFNO(mine.model_kind)
    optimizer = torch.optim.AdamW(model.parameters(), lr=mine.lr)
    scheduler = None
    if mine.sched == "onecycle":
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=mine.lr, total_steps=mine.total_steps_guess
        )
    elif mine.sched == "cosine":
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            optimizer, T_max=mine.total_steps_guess
        )
    hooks: list[Hook] = [RelL2(process_sample)]
    if mine.ledger:
        from melissa_trainer.hooks import SampleLedger

        hooks.append(SampleLedger())
    loss_fn = None
    if mine.model_kind == "dict":

        def loss_fn(outputs, targets, reduction="mean"):  # noqa: E306
            return torch.nn.functional.mse_loss(outputs["prediction"], targets, reduction=reduction)

    with refusals_end_the_program():
        trainer = OnlineTrainer(
            model,
            args,
            optimizer,
            scheduler,
            train_source=Study(launcher, stream),
            process_sample=process_sample,
            eval_dataset=validation_set(flow, 7),
            hooks=hooks,
            **({"loss_fn": loss_fn} if loss_fn else {}),
        )
        trainer.train()
    if trainer.is_main_process:
        print(
            "FINAL", trainer.state.global_step, math.nan if not trainer.state.log_history else "ok"
        )


if __name__ == "__main__":
    main()
