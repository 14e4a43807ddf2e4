"""The Navier–Stokes example's figure: a held-out simulation's truth, the model's
prediction and their difference at four times (`plot_comparison`), and the model's
fields for a list of samples (`predict`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from navier_stokes.errors import shown_lead_times

if TYPE_CHECKING:
    from melissa_trainer import OnlineTrainer
    from navier_stokes.train import FlowArgs

#: sample -> (inputs, target), the example's `make_process_sample`
ProcessSample = Callable[[Mapping[str, Any]], tuple[torch.Tensor, torch.Tensor]]


def predict(
    trainer: OnlineTrainer,
    samples: Sequence[Mapping[str, Any]],
    process_sample: ProcessSample,
    batch_size: int = 16,
) -> np.ndarray:
    """The model's fields for `samples` mapped by `process_sample` (the training's),
    (len, n, n) float32 numpy, `batch_size` samples at a time (a 256^2 validation set
    at once would hold every sample's activations together), in eval mode (a user's
    model may hold dropout or batch norms), its mode restored after."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    device = next(model.parameters()).device
    training, out = model.training, []
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(samples), batch_size):
                chunk = samples[start : start + batch_size]
                inputs = torch.stack([process_sample(s)[0] for s in chunk])
                out.append(model(inputs.to(device)).float().cpu().numpy()[:, 0])
    finally:
        model.train(training)
    return np.concatenate(out)


def plot_comparison(
    trainer: OnlineTrainer,
    samples: Sequence[dict[str, np.ndarray]],
    opts: FlowArgs,
    path: Path,
    model_name: str,
    process_sample: ProcessSample,
) -> None:
    """PNG of the initial field, then truth, prediction and error of one validation
    simulation at 4 times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = shown_lead_times(opts.time_steps)  # the printed table's
    chosen = [samples[s] for s in steps]  # the first validation simulation
    truth = np.stack([s["vorticity"] for s in chosen])
    prediction = predict(trainer, chosen, process_sample)
    error = prediction - truth
    fig, axes = plt.subplots(
        3, len(steps) + 1, figsize=(3 * len(steps) + 4, 8), squeeze=False, layout="constrained"
    )
    bound = float(np.abs(truth).max())
    axes[0][0].imshow(chosen[0]["initial"], origin="lower", cmap="RdBu_r", vmin=-bound, vmax=bound)
    axes[0][0].set_title("t = 0 (input)")
    for ax in axes[:, 0]:
        ax.axis("off")
    rows = [("truth", truth, bound), ("prediction", prediction, bound),
            ("error", error, max(float(np.abs(error).max()), 1e-6))]  # fmt: skip
    for r, (label, images, vmax) in enumerate(rows):
        for c, step in enumerate(steps):
            ax = axes[r][c + 1]
            im = ax.imshow(images[c], origin="lower", cmap="RdBu_r", vmin=-vmax, vmax=vmax)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"t = {(step + 1) * opts.interval:.3g}")
            if c == 0:
                ax.set_ylabel(f"{label} (vorticity)")
        fig.colorbar(im, ax=list(axes[r][1:]), shrink=0.9)
    nu, amplitude, wavenumber = chosen[0]["parameters"]
    fig.suptitle(
        f"held-out simulation (nu {nu:.3g}, forcing {amplitude:.2g} cos({int(wavenumber)} y), "
        f"{opts.grid_size}^2, model {model_name})"
    )
    fig.savefig(path, dpi=80)
    plt.close(fig)
