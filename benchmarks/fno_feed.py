"""How many Navier–Stokes simulations it takes to feed the FNO of `benchmarks/gpu.py`'s
``fno_busy`` case one fresh sample per draw: an estimate, not a benchmark (no baseline).

Two measurements on this machine's CPU, then arithmetic:

1. the solver's CPU time per step (`examples/navier_stokes/solver.py`'s `step_fields`,
   one thread, CPU seconds: what one core of the device machine spends, whatever else
   runs), at ``--grid`` (256);
2. one training step of the example's FNO (width 32, 12 modes, 4 layers, bf16 autocast,
   Adam) at ``--grid``, batch ``--count_batch`` (4; FLOPs and bytes scale with the
   batch): its FLOPs (`torch.utils.flop_counter`: convolutions, einsums; the FFTs at
   2.5 N log2 N per real transform), the bytes its operators read and write (each
   operator's inputs and outputs once: a lower bound of the memory traffic) and its
   operator count (the kernels a GPU launches, Adam's per-parameter loop aside).

The step's estimate on a GPU: bytes / (``--efficiency`` (0.8) x the HBM bandwidth) for
an H100 SXM (3.35 TB/s) and an H200 (4.8 TB/s): the FLOPs (~70 G at batch 16) take
under a millisecond of their tensor cores, so memory bounds it. From it, the samples
the FNO draws per second at ``--batch`` (16), and the simulations needed for each draw
to be a new sample at ``--interval`` time units (``--dt`` 0.00625) between fields.

    python benchmarks/fno_feed.py            # ~30 s on a CPU
    python benchmarks/fno_feed.py --json
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

# examples/: the example's modules as the package `navier_stokes` (never a bare `solver`)
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from navier_stokes.models import FNO  # noqa: E402
from navier_stokes.solver import forcing, initial_vorticity, step_fields  # noqa: E402

from melissa_trainer.common.json_output import to_json  # noqa: E402

#: HBM bandwidth, bytes/s
GPUS = {"H100 SXM": 3.35e12, "H200": 4.8e12}
#: operators that move no data (views)
VIEWS = {"view", "_unsafe_view", "expand", "t", "permute", "transpose", "slice", "select",
         "unsqueeze", "squeeze", "as_strided", "detach", "alias", "view_as_real",
         "view_as_complex", "_reshape_alias", "reshape"}  # fmt: skip


class Traffic(TorchDispatchMode):
    """Counts the operators run and the bytes of their tensor inputs and outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = self.ops = 0
        self.fft_flops = 0.0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        name = func._overloadpacket.__name__
        if name in VIEWS:
            return out
        self.ops += 1
        tensors = [t for t in tree_leaves((args, kwargs, out)) if isinstance(t, torch.Tensor)]
        self.bytes += sum(t.numel() * t.element_size() for t in tensors)
        if name.startswith("_fft"):  # 2.5 N log2 N per real 2-D transform of N points
            x = tensors[0]
            n = x.shape[-2] * max(x.shape[-1], out.shape[-1])
            self.fft_flops += 2.5 * (x.numel() / (x.shape[-2] * x.shape[-1])) * n * math.log2(n)
        return out


def solver_seconds(grid: int, dt: float, rounds: int = 5, steps: int = 10) -> float:
    """Median CPU seconds of one solver step at `grid`^2 (one thread)."""
    omega0, force = initial_vorticity(grid, 0), forcing(grid, 0.1, 3.0)
    per = []
    for _ in range(rounds):
        start = time.process_time()
        next(step_fields(omega0, 0.03, force, dt, [steps]))
        per.append((time.process_time() - start) / steps)
    return statistics.median(per)


def step_counts(grid: int, batch: int) -> dict[str, float]:
    """One FNO training step's FLOPs, bytes moved (lower bound) and operators."""
    torch.manual_seed(0)
    model = FNO(4, 32, 12, 4)
    x, y = torch.randn(batch, 4, grid, grid), torch.randn(batch, 1, grid, grid)
    flops, traffic = FlopCounterMode(display=False), Traffic()
    with flops, traffic:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
    ops_step = traffic.ops
    torch.optim.Adam(model.parameters(), lr=1e-3).step()
    return {
        "flops": flops.get_total_flops() + traffic.fft_flops,
        "bytes": traffic.bytes,
        "ops_forward_backward": ops_step,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--grid", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--count_batch", type=int, default=4)
    parser.add_argument("--dt", type=float, default=0.00625)
    parser.add_argument("--intervals", default="0.125,0.5", help="time units between fields")
    parser.add_argument("--efficiency", type=float, default=0.8)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args(argv)
    torch.set_num_threads(1)
    solver = solver_seconds(opts.grid, opts.dt)
    counts = step_counts(opts.grid, opts.count_batch)
    scale = opts.batch / opts.count_batch
    gb, gflop = counts["bytes"] * scale / 1e9, counts["flops"] * scale / 1e9
    result: dict[str, Any] = {
        "grid": opts.grid, "batch": opts.batch, "solver_cpu_ms_per_step": round(1e3 * solver, 2),
        "step_gflop": round(gflop, 1), "step_gb_moved_lower_bound": round(gb, 1),
        "ops_forward_backward": counts["ops_forward_backward"], "gpus": {},
    }  # fmt: skip
    for gpu, bandwidth in GPUS.items():
        step = gb * 1e9 / (opts.efficiency * bandwidth)
        draws = opts.batch / step
        per_interval = {}
        for interval in (float(i) for i in opts.intervals.split(",")):
            fields_per_s = 1 / (round(interval / opts.dt) * solver)
            per_interval[str(interval)] = {
                "fields_per_s_per_simulation": round(fields_per_s, 2),
                "simulations_for_one_draw_per_sample": math.ceil(draws / fields_per_s),
            }
        result["gpus"][gpu] = {
            "step_ms": round(1e3 * step, 1), "draws_per_s": round(draws), "intervals": per_interval,
        }  # fmt: skip
    if opts.json:
        print(to_json(result))
        return
    print(
        f"solver at {opts.grid}^2: {result['solver_cpu_ms_per_step']} ms of CPU per step; "
        f"FNO step at batch {opts.batch}: {gflop:.0f} GFLOP, >= {gb:.1f} GB moved, "
        f"{counts['ops_forward_backward']} operators (forward and backward)"
    )
    for gpu, g in result["gpus"].items():
        feeds = "; ".join(
            f"interval {i}: {v['fields_per_s_per_simulation']} fields/s per simulation, "
            f"{v['simulations_for_one_draw_per_sample']} simulations"
            for i, v in g["intervals"].items()
        )
        print(f"{gpu}: step ~{g['step_ms']} ms, {g['draws_per_s']} samples drawn/s; {feeds}")


if __name__ == "__main__":
    main()
