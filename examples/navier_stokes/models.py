"""The Navier–Stokes example's surrogates: a compact Fourier neural operator (the
default), a small periodic U-Net, and `neuraloperator`'s FNO when that package is
installed (``pip install "melissa-trainer[neuralop]"``).

Every model maps a batch of input fields (batch, channels, n, n) to one output field
(batch, 1, n, n), for any even n (the FNO's weights do not depend on the grid: a model
trained at 64^2 runs at 256^2). They are plain `torch.nn.Module`s, nothing specific to
this library.

Why an in-repo FNO beside `neuraloperator`: `neuraloperator` 2.0.0 installs cleanly
beside torch 2.13 (CPU) and its FNO trains here, but it requires 24 more packages
(`wandb` and its OpenTelemetry exporters, `h5py`, `pytest-mock`, `configmypy`,
`zencfg`, `tensorly`: 138 MB) and imports `wandb` on ``import neuralop``; the test suite
and a first run should not need them. The FNO below is the same architecture (Li et
al., ICLR 2021: lifting, Fourier layers of a truncated spectral convolution plus a
pointwise linear path, projection) in ~60 lines. `neuraloperator`'s FNO keeps its
spectral weights as complex parameters, which a fused optimizer refuses: the example
stores them as real pairs (`real_parameters`), as its own FNO does.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from navier_stokes.cli import MODELS  # (the command line's: it imports no torch)


class SpectralConv2d(nn.Module):
    """A convolution done in Fourier space, truncated to the `modes` lowest frequencies
    in each direction: rfft2, a learned complex linear map of the channels per kept
    mode, inverse rfft2. Kept modes: ky in [0, modes) and [-modes, 0), kx in [0, modes).

    The FFTs run in float32 even under bf16 autocast (torch's FFTs take no bf16 on most
    devices, and low-precision spectra lose the small scales); the output is float32.

    The weights, and the spectrum between the FFTs and the product, are real tensors of
    (real part, imaginary part) pairs in a last dimension of 2, viewed as complex only
    for the product (`torch.view_as_complex`, no copy): a complex parameter is refused by
    the fused optimizers (``torch.optim.Adam(..., fused=True)``: "requires all the params
    to be floating point"), and inductor (``torch_compile``) failed on the gradient of a
    complex tensor used twice (torch 2.13: "must be 1 to view ComplexFloat as Float").
    The same numbers as complex parameters, bit for bit: drawn alike, multiplied by the
    same kernel, and Adam updates a complex parameter through its real view.
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int) -> None:
        super().__init__()
        self.modes = modes
        scale = 1.0 / (in_channels * out_channels)
        shape = (2, in_channels, out_channels, modes, modes)  # [0]: ky >= 0, [1]: ky < 0
        weight = scale * torch.randn(*shape, dtype=torch.cfloat)
        self.weight = nn.Parameter(torch.view_as_real(weight).clone())  # shape + (2,)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n_y, n_x = x.shape[-2:]
        m = self.modes
        if 2 * m > n_y or m > n_x // 2 + 1:
            raise ValueError(
                f"{m} Fourier modes need a grid of at least {2 * m}^2, got {n_y}x{n_x}"
            )
        with torch.autocast(x.device.type, enabled=False):
            spectrum = torch.view_as_real(torch.fft.rfft2(x.float()))  # (b, i, y, x, 2)
            out = torch.zeros(
                x.shape[0], self.weight.shape[2], n_y, n_x // 2 + 1, 2,
                dtype=torch.float32, device=x.device,
            )  # fmt: skip
            out[:, :, :m, :m] = _mix(spectrum[:, :, :m, :m], self.weight[0])
            out[:, :, -m:, :m] = _mix(spectrum[:, :, -m:, :m], self.weight[1])
            return torch.fft.irfft2(torch.view_as_complex(out), s=(n_y, n_x))


def _mix(spectrum: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The complex product sum_i spectrum[b, i, x, y] * weight[i, o, x, y] -> [b, o, x,
    y] of (real, imaginary) pairs in the last dimension: complex views of both (no
    copy), so that the product is ATen's complex one while every gradient that autograd
    adds up is real."""
    product = torch.einsum(
        "bixy,ioxy->boxy", torch.view_as_complex(spectrum), torch.view_as_complex(weight)
    )
    return torch.view_as_real(product)


class FNO(nn.Module):
    """Fourier neural operator: a pointwise lift to `width` channels, `layers` Fourier
    layers (spectral convolution + pointwise linear, GELU between), a pointwise
    projection to one channel."""

    def __init__(self, in_channels: int, width: int = 32, modes: int = 12, layers: int = 4) -> None:
        super().__init__()
        self.lift = nn.Conv2d(in_channels, width, 1)
        self.spectral = nn.ModuleList(SpectralConv2d(width, width, modes) for _ in range(layers))
        self.pointwise = nn.ModuleList(nn.Conv2d(width, width, 1) for _ in range(layers))
        self.project = nn.Sequential(
            nn.Conv2d(width, 4 * width, 1), nn.GELU(), nn.Conv2d(4 * width, 1, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lift(x)
        for i, (spectral, pointwise) in enumerate(zip(self.spectral, self.pointwise, strict=True)):
            h = spectral(h) + pointwise(h)
            if i < len(self.spectral) - 1:
                h = nn.functional.gelu(h)
        return self.project(h)


def _block(in_channels: int, out_channels: int) -> nn.Sequential:
    """Two 3x3 convolutions with periodic padding (the domain is periodic), GELU."""
    conv: dict[str, Any] = {"kernel_size": 3, "padding": 1, "padding_mode": "circular"}
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, **conv), nn.GELU(),
        nn.Conv2d(out_channels, out_channels, **conv), nn.GELU(),
    )  # fmt: skip


class UNet(nn.Module):
    """A small U-Net: two 2x downsamplings (average pooling) and upsamplings, skip
    connections, `width`, 2 `width`, 4 `width` channels; the grid side must be a
    multiple of 4."""

    def __init__(self, in_channels: int, width: int = 32) -> None:
        super().__init__()
        self.down0 = _block(in_channels, width)
        self.down1 = _block(width, 2 * width)
        self.bottom = _block(2 * width, 4 * width)
        self.up1 = nn.ConvTranspose2d(4 * width, 2 * width, 2, stride=2)
        self.dec1 = _block(4 * width, 2 * width)
        self.up0 = nn.ConvTranspose2d(2 * width, width, 2, stride=2)
        self.dec0 = _block(2 * width, width)
        self.out = nn.Conv2d(width, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s0 = self.down0(x)
        s1 = self.down1(nn.functional.avg_pool2d(s0, 2))
        h = self.bottom(nn.functional.avg_pool2d(s1, 2))
        h = self.dec1(torch.cat([self.up1(h), s1], 1))
        h = self.dec0(torch.cat([self.up0(h), s0], 1))
        return self.out(h)


class TensorsOnly(nn.Module):
    """`model` whose state dict holds tensors only: `neuraloperator`'s models add a
    ``_metadata`` dict (their constructor's arguments) to theirs, which a safetensors
    checkpoint cannot hold (the trainer's save failed on it). Loading needs no change:
    those models accept a state dict without it."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        state = super().state_dict(*args, **kwargs)
        state.pop("_metadata", None)
        return state


class ComplexPairs(nn.Module):
    """A dense complex weight stored as a real parameter of (real part, imaginary part)
    pairs in a last dimension of 2 (`pairs`), read as the complex tensor it views
    (`torch.view_as_complex`, no copy): what `SpectralConv2d` does by hand, in place of
    the `tensorly-torch` ``DenseTensor`` that holds a `neuraloperator` spectral
    convolution's weight (indexing it and its ``to_tensor()`` give the complex tensor,
    as that class's do, and that is all the convolution asks of it)."""

    def __init__(self, value: torch.Tensor) -> None:
        super().__init__()
        self.pairs = nn.Parameter(torch.view_as_real(value.detach().clone()))

    @property
    def shape(self) -> torch.Size:
        return self.pairs.shape[:-1]

    def to_tensor(self) -> torch.Tensor:
        return torch.view_as_complex(self.pairs)

    def __getitem__(self, index: Any) -> torch.Tensor:
        return self.to_tensor()[index]


def real_parameters(model: nn.Module) -> nn.Module:
    """`model` with each dense complex ``weight`` (a module whose complex parameter
    ``tensor`` it gives by ``to_tensor()``: `neuraloperator`'s spectral convolutions,
    unfactorized as its FNO is by default) stored as real pairs (`ComplexPairs`); returns
    it. The same numbers and the same training (torch's Adam and AdamW step a complex
    parameter as its real view), but every parameter is then floating point, as a fused
    optimizer requires: ``torch.optim.Adam(..., fused=True)`` refuses a complex one
    ("`fused=True` requires all the params to be floating point"). A factorized weight
    (Tucker, CP, TT) is left as it is."""
    for module in list(model.modules()):
        weight = getattr(module, "weight", None)
        tensor = getattr(weight, "tensor", None) if isinstance(weight, nn.Module) else None
        dense = type(weight).__name__ == "DenseTensor" and hasattr(weight, "to_tensor")
        if dense and isinstance(tensor, nn.Parameter) and tensor.is_complex():
            module.weight = ComplexPairs(tensor)
    return model


def make_model(name: str, in_channels: int, width: int, modes: int, layers: int) -> nn.Module:
    """The model ``--model NAME`` selects (see `MODELS`); ValueError naming the fix if
    it is unknown or its package is missing."""
    if name == "fno":
        return FNO(in_channels, width, modes, layers)
    if name == "unet":
        return UNet(in_channels, width)
    if name == "neuralop":
        try:
            from neuralop.models import FNO as NeuralOpFNO
        except ImportError as exc:
            raise ValueError(
                f"--model neuralop needs the neuraloperator package ({exc}): "
                'pip install "melissa-trainer[neuralop]", or --model fno (the same '
                "architecture, in this example)"
            ) from exc
        # its spectral weights are complex parameters: stored as real pairs, so that a
        # fused optimizer takes them (`real_parameters`)
        return TensorsOnly(
            real_parameters(
                NeuralOpFNO(
                    n_modes=(modes, modes), hidden_channels=width, in_channels=in_channels,
                    out_channels=1, n_layers=layers,
                )
            )
        )  # fmt: skip
    raise ValueError(f"model={name!r} is not one of {MODELS}")
