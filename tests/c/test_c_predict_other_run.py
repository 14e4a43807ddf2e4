"""The C client's `mt_predict` through a rendezvous that holds only another run's serve
files fails at once, in the Python `Predictor`'s words (client/predict_lookup.py
`other_run`, tests/client/test_predictor_checks.py), the run id's names the C client's
(``MELISSA_TRAINER_RUN_ID``, unset for None): `MT_ETIMEDOUT` naming the serve files'
run, the one asked as and the fix; the next request, in the backoff, at once too.

Before the fix each request waited its whole timeout (`LONG`, past the test's own:
the test failed), then said only "belongs to another run (['run-a'])". Serve files of
two other runs: each run named, sorted, as Python's list (C named the last file read).

No trainer: a serve file written by hand (`write_serving`); nothing listens there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from predict_runs import CPredict
from predict_script import MT_ETIMEDOUT

from melissa_trainer.client.predict import Predictor
from melissa_trainer.client.predict_errors import PredictTimeout
from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.e2e  # every test here starts a process

#: longer than the test's own timeout: a request that waits for it fails the test
LONG = 120
#: the Python names of the run id -> the C client's
C_NAMES = {
    "(run_id): give run_id ": "(MELISSA_TRAINER_RUN_ID): give MELISSA_TRAINER_RUN_ID ",
    ", or None to ask any run's trainer": ", or unset it to ask any run's trainer",
}


def python_words(rendezvous: Path, sim: int) -> str:
    """The Python `Predictor`'s message for the same lookup, in the C client's names."""
    with (
        Predictor(sim, rendezvous_dir=rendezvous, run_id="run-b") as predictor,
        pytest.raises(PredictTimeout) as raised,
    ):
        predictor.predict({"u": np.zeros(4, np.float32)}, timeout=LONG)
    words = str(raised.value)
    for python, c in C_NAMES.items():
        assert python in words, (python, words)  # (the mapping still fits Python's words)
        words = words.replace(python, c)
    return words


@pytest.mark.timeout(60)
def test_only_another_runs_serve_files_fail_at_once_in_pythons_words(
    c_predict: CPredict, tmp_path: Path
) -> None:
    write_serving(tmp_path, 0, 1, "tcp://127.0.0.1:1", field_specs({"u": ((4,), "float32")}),
                  "run-a", None)  # fmt: skip
    env = {"MELISSA_TRAINER_RUN_ID": "run-b", "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}
    (first, first_words), (second, second_words) = c_predict.statuses(env, LONG, LONG)
    assert first == MT_ETIMEDOUT, first_words
    assert first_words == python_words(tmp_path, 7), first_words
    assert "belongs to another run (['run-a']), not run 'run-b'" in first_words
    # (the second, in the backoff: at once, the same why)
    assert second == MT_ETIMEDOUT, second_words
    assert "not run 'run-b' that this predictor asks as" in second_words, second_words


@pytest.mark.timeout(60)
def test_serve_files_of_two_other_runs_are_both_named_as_python_names_them(
    c_predict: CPredict, tmp_path: Path
) -> None:
    specs = field_specs({"u": ((4,), "float32")})
    write_serving(tmp_path, 0, 2, "tcp://127.0.0.1:1", specs, "run-c", None)
    write_serving(tmp_path, 1, 2, "tcp://127.0.0.1:2", specs, "run-a", None)
    env = {"MELISSA_TRAINER_RUN_ID": "run-b", "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}
    (first, first_words), _ = c_predict.statuses(env, LONG, LONG)
    assert first == MT_ETIMEDOUT, first_words
    assert "belongs to another run (['run-a', 'run-c']), not run 'run-b'" in first_words
    assert first_words == python_words(tmp_path, 7), first_words


#: 8 other runs of the longest run ids (64 characters), and the words both clients say of
#: them: the first 5, sorted, then their count (C cut its why at 512 bytes: 6 runs)
MANY = [f"run-{chr(ord('a') + k)}-" + "x" * 58 for k in range(8)]
MANY_WORDS = (
    "belongs to another run (["
    + ", ".join(f"'{run}'" for run in MANY[:5])
    + ", ... (8 in all)]), not run 'run-b'"
)


@pytest.mark.timeout(60)
def test_serve_files_of_many_other_runs_are_counted_past_five_as_python_counts_them(
    c_predict: CPredict, tmp_path: Path
) -> None:
    """Failed before: C's why stopped at its 512 bytes, within the 7th run's id, where
    Python listed the 8."""
    specs = field_specs({"u": ((4,), "float32")})
    for rank, run in enumerate(reversed(MANY)):  # (written out of order: said sorted)
        write_serving(tmp_path, rank, 8, f"tcp://127.0.0.1:{rank + 1}", specs, run, None)
    env = {"MELISSA_TRAINER_RUN_ID": "run-b", "MELISSA_TRAINER_RENDEZVOUS": str(tmp_path)}
    (first, first_words), _ = c_predict.statuses(env, LONG, LONG)
    assert first == MT_ETIMEDOUT, first_words
    assert MANY_WORDS in first_words, first_words
    assert first_words == python_words(tmp_path, 7), first_words
