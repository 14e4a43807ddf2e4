"""A request whose inputs are a mistake is a ValueError whatever the trainer's state,
not the fallback's `PredictTimeout` (docs/how-to/serve-while-training.md, "When the
trainer stops"): during the backoff after a trainer found gone, and after its serve file
was removed, inputs that are not those of the serve file last read (names, dtypes,
shapes) are refused as they are while it serves, and so are inputs the wire cannot carry
(a complex dtype, a dimension of 0) whether or not a trainer was ever found. A restarted
trainer whose inputs changed is not refused by the old ones: its serve file is read first.

Found in a user trial (hserve, 2026-12-05): a float64 input after the trainer stopped
raised `PredictTimeout` (a simulation falling back for ever on a bug of its own), the
ValueError it got while the trainer served. Failed before: the backoff's and the
removed file's ValueErrors (PredictTimeout), the zero dimension's (TypeError
"memoryview: cannot cast view with zeros in shape").

A real `PredictServer` per trainer (a thread answers ``y = 2 u + VERSION``), stopped:
its serve file removed, its socket closed. The backoff is made long (60 s) so that the
requests after the first failure are the backoff's, whatever the machine's speed."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from predict_server import VERSION, serving_u

import melissa_trainer.client.predict_link as predict_link
from melissa_trainer.client import Predictor, PredictTimeout

pytestmark = pytest.mark.timeout(60)

U = np.ones(4, np.float32)
#: a request's timeout, longer than the test's: one that waits for it fails the test
LONG = 120.0
#: the first request after the trainer stopped: refused, or, when the client's link had
#: not yet seen the close (a loaded machine: the rehearsal of 2026-12-07), sent and lost
#: while it waited; both are the trainer found gone, and the backoff follows either way
FOUND_GONE = (
    "refused the connection: nothing listens there|was lost while the request waited for its answer"
)


@pytest.fixture
def long_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(predict_link, "_BACKOFF", (60.0, 60.0))


@pytest.mark.usefixtures("long_backoff")
def test_wrong_inputs_after_the_trainer_stopped_are_a_value_error(tmp_path: Path) -> None:
    rv = tmp_path / "rv"
    with Predictor(0, rendezvous_dir=rv) as client:
        with serving_u(rv, "float32"):
            assert client.predict({"u": U}, timeout=LONG).version == VERSION
            with pytest.raises(ValueError, match="input 'u' is <f8"):
                client.predict({"u": U.astype(np.float64)}, timeout=LONG)
        # the trainer stopped (its serve file removed): the next request falls back
        with pytest.raises(PredictTimeout, match=FOUND_GONE):
            client.predict({"u": U}, timeout=LONG)
        for mistake, words in [
            ({"u": U.astype(np.float64)}, "input 'u' is <f8 (4,), declared <f4 (4,)"),
            ({"u": U[:3]}, "input 'u' is <f4 (3,), declared <f4 (4,)"),
            ({"v": U}, "the trainer serves inputs ['u']"),
            ({"u": np.zeros(0, np.float32)}, "dimensions must be >= 1"),
        ]:
            with pytest.raises(ValueError) as raised:
                client.predict(mistake, timeout=LONG)  # (before: PredictTimeout, the backoff's)
            assert words in str(raised.value), raised.value
        with pytest.raises(PredictTimeout, match="at an earlier request"):
            client.predict({"u": U}, timeout=LONG)  # (right inputs: the backoff's fallback)


@pytest.mark.usefixtures("long_backoff")
def test_a_restarted_trainer_with_other_inputs_is_read_before_they_are_checked(
    tmp_path: Path,
) -> None:
    rv = tmp_path / "rv"
    with Predictor(0, rendezvous_dir=rv) as client:
        with serving_u(rv, "float32"):
            assert client.predict({"u": U}, timeout=LONG).version == VERSION
        with pytest.raises(PredictTimeout, match=FOUND_GONE):
            client.predict({"u": U}, timeout=LONG)
        with serving_u(rv, "float64"):  # (its serve file ends the backoff)
            u64 = U.astype(np.float64)
            outputs, version = client.predict({"u": u64}, timeout=LONG)
            assert version == VERSION
            np.testing.assert_array_equal(outputs["y"], 2 * u64 + VERSION)


def test_inputs_the_wire_cannot_carry_are_a_value_error_with_no_trainer_known(
    tmp_path: Path,
) -> None:
    """No serve file was ever read (the trainer not started): nothing to check the
    names, dtypes and shapes against, but a dtype the wire has no code for, or a
    dimension of 0, is a mistake all the same (the C client's EDTYPE, ESHAPE)."""
    with Predictor(0, rendezvous_dir=tmp_path / "none") as client:
        with pytest.raises(ValueError, match="dtype complex128"):
            client.predict({"u": np.ones(4, complex)}, timeout=0.05)
        with pytest.raises(ValueError, match="dimensions must be >= 1"):
            client.predict({"u": np.zeros((2, 0), np.float32)}, timeout=0.05)
        with pytest.raises(
            PredictTimeout, match="no serving endpoint in"
        ):  # (a float64 may be its inputs: not known)
            client.predict({"u": U.astype(np.float64)}, timeout=0.05)
