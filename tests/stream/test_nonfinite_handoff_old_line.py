"""A hand-off line of the older format (simulation id, time step, failures seen, why:
no attempt) is read as of attempt 1 (held until the simulation's first HELLO, as it
was then), not dropped because its why is no number."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.stream.nonfinite_handoff import HANDOFF_FILE, NonfiniteHandoff

pytestmark = pytest.mark.timeout(60)


def test_a_four_field_hand_off_line_is_of_attempt_1(tmp_path: Path) -> None:
    zero = NonfiniteHandoff(tmp_path, "r", 0, 2)
    zero.listen()
    (tmp_path / f"{HANDOFF_FILE}.1").write_text("r\n3\t7\t0\tnan in u\n4\t8\t1\t2\tb\n")
    assert zero.heard() == [
        (3, 7, 0, 1, "nan in u (receiver of rank 1)"),  # (before: dropped)
        (4, 8, 1, 2, "b (receiver of rank 1)"),
    ]
