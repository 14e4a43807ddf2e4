"""docs/how-to/own-solver.md's refusal section quotes the waits of a refusal under
``accelerate launch``: a rank's wait for rank 0's line (`refusals.QUIET_RANK_GRACE`) and
rank 0's wait for the others' reads (`refusal_mark.READ_WAIT`). Found in review
(hrev13): READ_WAIT went from 5 to 15 s and the page still said "at most 5 s later"."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.trainer import refusal_mark, refusals

PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "own-solver.md"


@pytest.mark.timeout(30)
def test_the_page_quotes_the_refusal_waits() -> None:
    text = " ".join(PAGE.read_text().split())
    assert f"rank 0 refused nothing: after up to {refusals.QUIET_RANK_GRACE:g} s" in text
    assert f"have read its line (at most {refusal_mark.READ_WAIT:g} s later" in text
    assert f"waits all {refusal_mark.READ_WAIT:g} s" in text
    assert f"two DNS lookups of {refusal_mark.LOST_LOOKUP:g} s" in text
