"""The C client's `mt_predict` with inputs holding NaN or Inf: sent as they are (the C
client never refuses them on its side), refused by the trainer's serving socket under
its ``nonfinite`` policy (``"refuse"``, the default): `MT_EREFUSED`, refusal
`MT_REFUSAL_BAD_REQUEST` (4), the trainer's detail naming the input and the policy;
served under ``"accept"``. The client says so once on stderr, in the Python client's
words (`finite_check.warn_nonfinite_inputs`). As the Python client's
(tests/stream/test_serving_nonfinite.py).

Before: served under any policy (the model, here ``y = 2 u + VERSION``, answered NaN),
and the C client said nothing.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from predict_runs import CPredict
from predict_script import MT_EREFUSED, outputs_of, status
from predict_server import VERSION, answering_server

pytestmark = pytest.mark.e2e  # every test here starts a process


@pytest.mark.timeout(300)
@pytest.mark.parametrize("policy", ["refuse", "accept"])
def test_nonfinite_inputs_follow_the_trainers_policy(
    c_predict: CPredict, tmp_path: Path, policy: str
) -> None:
    env = {"MELISSA_TRAINER_RENDEZVOUS": str(tmp_path / "rv")}
    with (
        answering_server(tmp_path / "rv", nonfinite=policy) as (server, _),
        c_predict.script(env, 3, ask=[]) as script,
    ):
        bad = script.send("input u 1 1 4 : 1 nan 3 inf", "output y 1 4", "predict 20")
        good = script.send("unstage", "input u 1 1 4 : 1 2 3 4", "output y 1 4", "predict 20")
        again = script.send("unstage", "input u 1 1 4 : nan 2 3 4", "output y 1 4", "predict 20")
        lines, err = script.finish()
    told = [line for line in err.splitlines() if "holds NaN or Inf" in line]
    assert told == [  # (once: the second such request says nothing)
        "melissa_trainer: simulation 3: mt_predict() input 'u' holds NaN or Inf; it is sent as "
        "it is and the trainer applies its nonfinite policy to it (by default the request is "
        "refused: MT_EREFUSED, MT_REFUSAL_BAD_REQUEST). Later non-finite inputs of this client "
        "are not logged."
    ]
    assert lines[again][0].startswith("refusal 4" if policy == "refuse" else "version")
    np.testing.assert_array_equal(outputs_of(lines, good)[1]["y"], [19, 21, 23, 25])
    if policy == "accept":
        version, outs = outputs_of(lines, bad)
        assert version == VERSION and status(lines, bad) == (0, "")
        np.testing.assert_array_equal(outs["y"], [19, np.nan, 23, np.inf])
        assert server.telemetry() == {"requests": 3, "answered": 3}
        return
    assert lines[bad][0] == "refusal 4 0"
    assert status(lines, bad) == (
        MT_EREFUSED,
        "the trainer refused the prediction (bad_request): nonfinite: input 'u' holds NaN "
        "or Inf; this trainer refuses such requests (its nonfinite='refuse'; "
        "nonfinite='accept' serves them)",
    )
    assert server.telemetry() == {"requests": 3, "refused_nonfinite": 2, "answered": 1}
