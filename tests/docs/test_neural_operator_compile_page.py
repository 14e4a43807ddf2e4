"""docs/how-to/neural-operator.md, "Your own model", **Real parameters**: the advice for
compiling your own FNO names the spectrum, not only the weights (trial 29: a user stored
the weights as (re, im) pairs as the page said, kept `torch.fft.rfft2(x)` complex and
sliced it twice, and `--torch_compile` failed inductor at the first step:
"self.stride(-1) must be 1 to view ComplexFloat as Float ..., but got 12").

The page's words are checked here; what they say of inductor is reproduced by
`test_a_complex_spectrum_sliced_twice_fails_inductor` (e2e: inductor runs a C++
compiler), and the example's FNO, whose spectrum is pairs, compiling by
tests/examples/test_example_navier_stokes_models.py. A torch whose inductor handles the
complex spectrum fails that test: then the page's bullet is to be rewritten.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "neural-operator.md"


def real_parameters_bullet() -> str:
    text = PAGE.read_text(encoding="utf-8")
    found = re.search(r"- \*\*Real parameters\*\*:(.*?)(?=\n- \*\*|\n## )", text, re.S)
    assert found, f"no **Real parameters** bullet in {PAGE}"
    return " ".join(found.group(1).split())


def test_the_bullet_says_the_spectrum_too() -> None:
    bullet = real_parameters_bullet()
    assert "complex tensor used twice" in bullet, bullet
    assert "spectrum" in bullet and "torch.view_as_real(torch.fft.rfft2(x))" in bullet, bullet
    assert "must be 1 to view ComplexFloat as Float" in bullet, bullet


class ComplexSpectrum(torch.nn.Module):
    """Trial 29's spectral layer: weights as (re, im) pairs, each corner's viewed as
    complex at its own use, the spectrum complex and sliced twice (Li et al.'s FNO)."""

    def __init__(self, width: int, modes: int) -> None:
        super().__init__()
        self.modes = modes
        self.w = torch.nn.Parameter(torch.randn(2, width, width, modes, modes, 2) / width**2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, n, _ = x.shape
        xf = torch.fft.rfft2(x)
        out = torch.zeros(b, c, n, n // 2 + 1, dtype=torch.cfloat, device=x.device)
        m = self.modes
        w0, w1 = torch.view_as_complex(self.w[0]), torch.view_as_complex(self.w[1])
        out[:, :, :m, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, :m, :m], w0)
        out[:, :, -m:, :m] = torch.einsum("bixy,ioxy->boxy", xf[:, :, -m:, :m], w1)
        return torch.fft.irfft2(out, s=(n, n))


class TinyFNO(torch.nn.Module):
    """Trial 29's FNO: a lift, `layers` of gelu(spectral + pointwise)."""

    def __init__(self, layers: int = 2, width: int = 12, modes: int = 6) -> None:
        super().__init__()
        self.lift = torch.nn.Conv2d(3, width, 1)
        self.spec = torch.nn.ModuleList(ComplexSpectrum(width, modes) for _ in range(layers))
        self.point = torch.nn.ModuleList(torch.nn.Conv2d(width, width, 1) for _ in range(layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.lift(x)
        for spectral, pointwise in zip(self.spec, self.point, strict=True):
            h = torch.nn.functional.gelu(spectral(h) + pointwise(h))
        return h


@pytest.mark.e2e  # inductor runs a C++ compiler
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_complex_spectrum_sliced_twice_fails_inductor() -> None:
    """What the bullet says, at trial 29's tiny size (two layers, grid 16, width 12, 6
    modes; one layer compiles): inductor fails on the gradient of the spectrum; eager
    runs."""
    torch.manual_seed(0)
    model = TinyFNO()
    x = torch.randn(2, 3, 16, 16)
    model(x).square().mean().backward()  # eager: fine
    compiled = torch.compile(model, backend="inductor")
    with pytest.raises(Exception, match="must be 1 to view ComplexFloat as Float"):
        compiled(x).square().mean().backward()
