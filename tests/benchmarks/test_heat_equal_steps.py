"""benchmarks/heat_equal_steps.py: its offline arm is `online_vs_offline.py`'s offline
training (the same batches, bit for bit), its online arm puts every sample once into
the trainer's buffer, and the command prints its rows well formed. No figure is
asserted: they are for people to read."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import heat_equal_steps as bench  # noqa: E402
import heat_offline as off  # noqa: E402
import heat_pipelines as hp  # noqa: E402

SETUP = hp.Setup(grid_size=8, time_steps=10, hidden=32, buffer_size=100, watermark=20,
                 n_validation=2)  # fmt: skip


@pytest.fixture(scope="module")
def validation():
    return hp.validation_set(SETUP)


@pytest.mark.timeout(60)
def test_the_offline_arm_is_train_offline_at_a_step_count(tmp_path, validation) -> None:
    samples = bench.simulate(SETUP, 3)
    # the files the solver's --save_npy writes for these simulations (a .npy of the
    # fields, a .json of the parameters), read by the benchmark's offline pipeline
    files = []
    for k, parameters in enumerate(hp.design(SETUP, 3)):
        path = tmp_path / f"sim-{k}.npy"
        np.save(path, np.stack([s["temperature"] for s in samples if s["simulation"] == k]))
        Path(f"{path}.json").write_text(json.dumps(parameters))
        files.append(str(path))
    reference = off.train_offline(SETUP, files, validation, epochs=2)
    steps = 2 * math.ceil(3 * SETUP.time_steps / SETUP.batch_size)
    assert reference["steps"] == steps
    ours = bench.offline(SETUP, samples, 3, steps, validation)
    assert ours["val_mse"] == reference["val_mse"]  # the same batches, rates and weights
    # a prefix of the simulations: not the same data, not the same result
    assert bench.offline(SETUP, samples, 2, steps, validation)["val_mse"] != ours["val_mse"]


@pytest.mark.timeout(60)
def test_the_online_arm_streams_every_sample_into_the_trainers_buffer(tmp_path, validation) -> None:
    samples = bench.simulate(SETUP, 8)
    run = bench.online(SETUP, samples, 40, validation, str(tmp_path))
    assert run["simulations"] == 8 and math.isfinite(run["val_mse"])
    # 80 samples in a buffer of 100: nothing evicted, so the last draw (as many as it
    # holds, with replacement) comes from the 8 simulations, all within the last 100
    assert 1 <= run["distinct_simulations_drawn"] <= 8 and run["share_of_last_100"] == 1.0
    # a buffer smaller than the stream keeps a window of it: the oldest simulations
    # are evicted first on average, never the ones not yet drawn
    small = hp.Setup(**{**SETUP.__dict__, "buffer_size": 40})
    many = bench.simulate(small, 30)
    windowed = bench.online(small, many, 200, validation, str(tmp_path / "small"))
    assert windowed["distinct_simulations_drawn"] < 30


@pytest.mark.timeout(60)
def test_a_draw_policy_is_an_arm_of_its_own(tmp_path, validation) -> None:
    samples = bench.simulate(SETUP, 8)
    uniform = bench.online(SETUP, samples, 40, validation, str(tmp_path / "a"))
    again = bench.online(SETUP, samples, 40, validation, str(tmp_path / "b"), 1, 1)
    assert again == {**uniform, "seconds": again["seconds"]}  # the default: the same run
    fewest = bench.online(SETUP, samples, 40, validation, str(tmp_path / "c"), 4, 1)
    assert fewest["val_mse"] != uniform["val_mse"]  # other draws, other weights


def test_draw_shares_weigh_each_tenth_of_the_stream() -> None:
    small = hp.Setup(**{**SETUP.__dict__, "buffer_size": 40})
    uniform, _ = bench.draw_shares(small, 30, 300, 1, 1)
    fewest, _ = bench.draw_shares(small, 30, 300, 4, 1)
    # shares of the mean, 3 simulations a tenth: they average to 1
    assert len(uniform) == 10 and np.mean(uniform) == pytest.approx(1.0)
    # early simulations are drawn while the rate is high, late ones when it is low
    assert uniform == sorted(uniform, reverse=True)
    # the least drawn of 4: the first tenth nearer its share, the middle ones too
    assert 1 < fewest[0] < uniform[0] and fewest[4] > uniform[4]


def test_policies_are_parsed_and_checked() -> None:
    parser = bench.argparse.ArgumentParser()
    assert bench.parse_policies(parser, "1/1, 2/1,4") == [(1, 1), (2, 1), (4, 1)]
    for bad in ("2/x", "0/1", "2/1,2/1"):
        with pytest.raises(SystemExit, match="^2$"):
            bench.parse_policies(parser, bad)


@pytest.mark.e2e  # starts a process
@pytest.mark.timeout(120)
def test_quick_json_gives_its_rows_well_formed() -> None:
    command = [sys.executable, str(BENCHMARKS / "heat_equal_steps.py"), "--quick", "--json",
               "--seeds", "0,1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=110, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])["rows"]
    assert len(rows) == 3
    for r in rows:
        assert set(r) == {"case", "ours", "baseline", "unit", "ratio", "target"}, r
        assert r["ours"] > 0 and r["baseline"] > 0 and r["target"] is None
        assert r["ratio"] == pytest.approx(r["baseline"] / r["ours"], rel=1e-2), r
    assert "2 seeds" in rows[0]["case"] and rows[1]["ratio"] <= 1 and rows[2]["ratio"] <= 1


def test_a_stream_that_ends_early_and_a_held_rate_give_the_late_simulations_their_draws() -> None:
    small = hp.Setup(**{**SETUP.__dict__, "buffer_size": 40})
    cosine, _ = bench.draw_shares(small, 30, 300, 1, 1)
    # the stream over by half the steps, the rate held until then: the last tenth is
    # drawn at a high rate while it is new, and replayed after
    held, _ = bench.draw_shares(small, 30, 300, 1, 1, stream_fraction=0.5, decay_from=0.5)
    assert np.mean(held) == pytest.approx(1.0)
    assert held[-1] > 5 * cosine[-1] and held[0] < cosine[0]


def test_the_rate_is_held_until_decay_from_then_decays_to_zero() -> None:
    lr = SETUP.learning_rate
    assert hp.learning_rate(SETUP, 0.0) == lr and hp.learning_rate(SETUP, 1.0) == pytest.approx(0)
    assert hp.learning_rate(SETUP, 0.5, 0.6) == lr  # held
    assert hp.learning_rate(SETUP, 0.8, 0.6) == pytest.approx(lr / 2)  # halfway down
    assert hp.learning_rate(SETUP, 0.5) == pytest.approx(lr / 2)  # the plain cosine


@pytest.mark.timeout(60)
def test_the_online_arm_puts_every_sample_by_the_stream_fraction(tmp_path, validation) -> None:
    samples = bench.simulate(SETUP, 8)
    early = bench.online(SETUP, samples, 40, validation, str(tmp_path / "a"),
                         stream_fraction=0.5, decay_from=0.5)  # fmt: skip
    assert early["simulations"] == 8 and math.isfinite(early["val_mse"])
    whole = bench.online(SETUP, samples, 40, validation, str(tmp_path / "b"))
    assert early["val_mse"] != whole["val_mse"]  # other batches, other rates
