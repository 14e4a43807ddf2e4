"""A `Predictor` request that waits its whole timeout for a serve file names that
timeout, as the C client's (clients/c/src/serve.c: "no serving endpoint in 'DIR' within
1.0 s: ..."). It said "no serving endpoint in 'DIR': ..." without the figure, which the
reader of a log then had to find in the code; its other timeouts name theirs.

A timeout given as an int is said as the float it is waited as ("1.0"), as C's double.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from melissa_trainer.client import Predictor
from melissa_trainer.client.predict_errors import PredictTimeout

INPUTS = {"u": np.zeros(2, np.float32)}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("timeout", "said"), [(1, "1.0"), (0.25, "0.25")])
def test_a_rendezvous_without_serve_files_times_out_naming_the_seconds(
    tmp_path: Path, timeout: float, said: str
) -> None:
    predictor = Predictor(3, rendezvous_dir=tmp_path)
    try:
        with pytest.raises(PredictTimeout) as error:
            predictor.predict(INPUTS, timeout=timeout)
    finally:
        predictor.close()
    assert str(error.value) == (
        f"no serving endpoint in '{tmp_path}' within {said} s: "
        "no trainer serves predictions there (yet)"
    )
