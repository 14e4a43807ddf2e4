"""The examples' command lines (what --help shows is what they run with: each example's
`main` called in this process, as its ``__main__`` calls it with the command line; the
subprocesses of test_example_heat.py, test_example_lorenz.py and the oscillator run
below start each example's command for real), and the oscillator example (an
in-process source) end to end, in a subprocess."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

EXAMPLES = Path(__file__).parents[2] / "examples"
EXAMPLE = EXAMPLES / "oscillators" / "train.py"
#: one torch thread, as every other test's trainer runs: on 2 busy cores, two threads for
#: this small MLP make the oscillator run 1.5x (idle) to 4x (loaded) slower, same result
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def load_example(example: str) -> ModuleType:
    """``examples/EXAMPLE/train.py``, imported as ``EXAMPLE.train`` (examples/ is on the
    tests' ``sys.path``): each example's own modules are ``EXAMPLE.solver`` and so on, so
    that the heat, Lorenz and Navier–Stokes solvers never clash in this process."""
    return importlib.import_module(f"{example}.train")


def run_main(
    example: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[object, str, str]:
    """The example's ``main(argv)``, what its command line runs: the exit code it
    raised (None: it returned), its stdout and stderr."""
    main = load_example(example).main
    capsys.readouterr()
    try:
        main(argv)
        code: object = None
    except SystemExit as exit_:
        code = exit_.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.timeout(150)
@pytest.mark.parametrize(
    ("example", "shown"),
    [
        ("heat_pde", {"buffer": "reservoir", "buffer_size": "4000", "watermark": "500",
                      "sample_to_insert_ratio": "8.0", "batch_size": "32",
                      "output_dir": "outputs/heat_pde"}),
        ("lorenz", {"buffer": "reservoir", "buffer_size": "20000", "watermark": "2000",
                    "sample_to_insert_ratio": "4.0", "batch_size": "128"}),
        ("oscillators", {"buffer": "firo", "buffer_size": "2048", "watermark": "512",
                         "batch_size": "64"}),
        ("navier_stokes", {"buffer": "reservoir", "buffer_size": "480", "watermark": "64",
                           "sample_to_insert_ratio": "16.0", "batch_size": "16",
                           "output_dir": "outputs/navier_stokes", "grid_size": "64",
                           "model": "fno"}),
    ],
)  # fmt: skip
def test_help_shows_the_defaults_the_example_runs_with(
    example: str,
    shown: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(example, ["--help"], capsys)
    assert code == 0, err[-3000:]
    text = " ".join(out.split())  # argparse wraps lines
    for name, value in shown.items():
        flag_help = text.split(f"--{name} ")[2].split(" --")[0]  # [1] is the usage line
        assert f"(default: {value})" in flag_help, (name, flag_help)
    # a bad value is argparse's error naming the flag, before anything starts
    argv = ["--watermark", "10", "--buffer_size", "5", "--batch_size", "2"]
    code, _, err = run_main(example, argv, capsys)
    assert code == 2 and "Traceback" not in err
    assert "error: argument --watermark: watermark=10 is larger than buffer_size=5" in err
    assert not (tmp_path / "outputs").exists()


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_oscillator_example_beats_the_mean_field(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(EXAMPLE),
        "--json",
        "--num_simulations",
        "256",
        "--output_dir",
        str(tmp_path / "out"),
        "--disable_progress_bar",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, cwd=tmp_path, env=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 400  # 256 simulations x 100 steps / batch 64
    # the validation at the last step, logged once: the example reuses it rather than
    # running (and logging) a second one, and reports what was logged
    (last,) = [line for line in proc.stdout.splitlines() if line.startswith("step 400 | eval_loss")]
    assert f"{summary['val_mse']:.4g}" in last
    assert summary["val_mse"] < 0.5 * summary["mean_field_mse"]
    assert (tmp_path / "out" / "checkpoints" / "checkpoint-400").is_dir()
    assert list((tmp_path / "out" / "runs").glob("events.out.tfevents.*"))


def heat_samples(names: tuple[str, ...], rng: np.random.Generator) -> list[dict[str, Any]]:
    return [
        {
            "parameters": rng.uniform(200.0, 400.0, len(names)).astype(np.float32),
            "time_step": np.array(t, np.int64),
            "temperature": rng.uniform(250.0, 350.0, (6, 6)).astype(np.float32),
        }
        for t in (0, 3, 9, 4)
    ]


def mappings(example: str, rng: np.random.Generator) -> tuple[Any, Any, list[dict[str, Any]]]:
    """(the example's per-sample mapping, its per-batch one, samples shaped like its
    stream's)."""
    module = load_example(example)
    if example == "heat_pde":
        samples = heat_samples(module.PARAMETER_NAMES, rng)
        return module.make_process_sample(10), module.make_process_batch(10), samples
    if example == "heat_c":
        samples = heat_samples(module.PARAMETER_NAMES, rng)
        return module.process_sample(10), module.process_batch(10), samples
    if example == "oscillators":
        samples = [
            {"params": module.draw_parameters(rng), "t": np.asarray(np.float32(t / 7)),
             "state": rng.standard_normal(2).astype(np.float32)}
            for t in range(4)
        ]  # fmt: skip
        return module.process_sample, module.process_batch, samples
    transitions = module.Transitions(0.01)
    bounds = module.PARAMETER_BOUNDS
    samples = [
        {"parameters": np.array([rng.uniform(*bounds[n]) for n in module.PARAMETER_NAMES]),
         "transition": rng.normal(10.0, 8.0, (2, 3))}
        for _ in range(4)
    ]  # fmt: skip
    return transitions, transitions.batch, samples


@pytest.mark.parametrize("example", ["heat_pde", "heat_c", "oscillators", "lorenz"])
def test_each_examples_batch_mapping_equals_its_sample_mapping(example: str) -> None:
    """The `process_batch` an example trains with under ``--buffer_device accelerator``
    (batches gathered on the device never go through a per-sample function: the flag,
    listed by each example's --help, raised before) gives what its `process_sample`,
    stacked, gives: on a block of arrays, and on one of tensors (a `DeviceBlock`'s)."""
    from melissa_trainer.buffers import SampleBlock

    one, batch, samples = mappings(example, np.random.default_rng(5))
    expected = [torch.stack(part) for part in zip(*(one(s) for s in samples), strict=True)]
    block = SampleBlock.from_samples(samples)

    class Tensors:  # a DeviceBlock's view: its fields are tensors
        fields = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in block.fields.items()}

    for got in (batch(block), batch(Tensors())):
        for g, e in zip(got, expected, strict=True):
            assert g.dtype == e.dtype == torch.float32 and g.shape == e.shape
            torch.testing.assert_close(g, e, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_heat_examples_batch_mapping_is_its_sample_mapping_bit_for_bit(dtype: type) -> None:
    """The heat example trains with `make_process_batch` on the host too (batches read
    from the reservoir stored by column), so it must give `make_process_sample`'s bits,
    not only close values: then a run trains exactly as it did with the per-sample
    mapping. The parameters come as the launcher streams them (float64) or as float32."""
    from melissa_trainer.buffers import SampleBlock

    module = load_example("heat_pde")
    rng = np.random.default_rng(11)
    names = module.PARAMETER_NAMES
    samples = [
        {
            "parameters": rng.uniform(200.0, 400.0, len(names)).astype(dtype),
            "time_step": np.array(t, np.int64),
            "temperature": rng.uniform(200.0, 400.0, (8, 8)).astype(np.float32),
        }
        for t in rng.integers(0, 100, 64)
    ]
    one, batch = module.make_process_sample(100), module.make_process_batch(100)
    expected = [torch.stack(part) for part in zip(*(one(s) for s in samples), strict=True)]
    got = batch(SampleBlock.from_samples(samples))
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype == torch.float32 and g.shape == e.shape
        assert torch.equal(g, e), (g - e).abs().max()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_heat_examples_features_at_ingest_are_its_sample_mapping_bit_for_bit(dtype: type) -> None:
    """The heat example computes its features once per sample, at ingest
    (`make_ingest_block`), and a step gathers them (`gather_batch`): the batches must be
    `make_process_sample`'s bits, so that it trains exactly as with the per-draw mapping.
    The trainer keeps ``simulation_id`` and ``time_step``, the example the parameters; the
    raw field is gone."""
    from melissa_trainer.buffers import SampleBlock
    from melissa_trainer.sources.ingest_transform import IngestTransform

    module = load_example("heat_pde")
    rng = np.random.default_rng(12)
    names = module.PARAMETER_NAMES
    samples = [
        {
            "parameters": rng.uniform(200.0, 400.0, len(names)).astype(dtype),
            "time_step": np.array(t, np.int64),
            "temperature": rng.uniform(200.0, 400.0, (8, 8)).astype(np.float32),
            "simulation_id": np.array(i // 10, np.int64),
        }
        for i, t in enumerate(rng.integers(0, 100, 64))
    ]
    one = module.make_process_sample(100)
    expected = [torch.stack(part) for part in zip(*(one(s) for s in samples), strict=True)]
    transform = IngestTransform(ingest_block=module.make_ingest_block(100))
    stored = transform.block(SampleBlock.from_samples(samples))
    assert set(stored.fields) == {"inputs", "target", "parameters", "simulation_id", "time_step"}
    # drawn from the buffer in another order, in another block: the same rows
    order = rng.permutation(64)
    drawn = SampleBlock({k: v[order] for k, v in stored.fields.items()})
    got = module.gather_batch(drawn)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype == torch.float32 and g.shape == e.shape
        assert torch.equal(g, e[torch.from_numpy(order)]), (g - e[order]).abs().max()
    # a sample alone (a block of one) gives its row of the block
    alone = transform.sample(samples[5])
    assert alone["inputs"].tobytes() == stored.fields["inputs"][5].tobytes()


def test_the_oscillator_says_worse_when_its_model_is_worse_than_the_mean_state() -> None:
    """A model 40 times worse than predicting the mean state was printed "0.0x better"
    (the baseline / model ratio, always called better)."""
    compared = load_example("oscillators")._compared
    assert compared(1.0, 0.25) == "4.0x better"
    assert compared(0.025, 1.0) == "40.0x worse"
