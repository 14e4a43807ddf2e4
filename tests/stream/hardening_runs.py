"""What the tests of the receiver under abuse share (test_receiver_log_summary.py,
test_receiver_bounds.py): `F32`, and `messages`, the messages that one logger
(``summary`` by default) logged, captured by caplog.
"""

from __future__ import annotations

import numpy as np
import pytest

F32 = np.dtype("<f4")


def messages(caplog: pytest.LogCaptureFixture, name: str = "summary") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == name]
