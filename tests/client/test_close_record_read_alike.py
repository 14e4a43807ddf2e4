"""A close's stop records (`StopRecords`) read from a rank file as every reader of
rendezvous files reads it (`rank_bounds.read_file`, the one reader; the C client's
rules; the trainer's `remove_serving`: tests/stream/test_remove_serving_said.py).

Failed before: json.loads refused a file holding an integer of 4301 digits, where the C
client's close reads it (clients/c/src/stop_record.c look_at): the Python close read no
record there. The oracle: the record as written."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_close_all_taken_record import EP, RUN, SID, WHOSE, ingest

from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.endpoints import mark_stopped, write_rendezvous
from melissa_trainer.stream.stop_record import StopReason, build_record
from melissa_trainer.stream.stop_record_read import parse_record

pytestmark = pytest.mark.timeout(30)

#: a member no trainer writes, of one digit more than Python's int() converts
LONG = f'"n": {"7" * 4301}, '


@pytest.mark.parametrize("before", [" \n", f"{{{LONG}"], ids=["white space", "4301 digits"])
def test_a_close_reads_a_stop_record_as_the_c_client(tmp_path: Path, before: str) -> None:
    record = build_record(ingest(2), RUN, StopReason("preempted", "SIGTERM"))
    rv = tmp_path / "rv"
    write_rendezvous(rv, 0, 1, EP, {"run_id": RUN})
    mark_stopped(rv, 0, EP, record)
    path = rv / "rank_0.json"
    text = path.read_text()
    path.write_text(before + text if before.isspace() else before + text[1:])
    said = StopRecords(str(rv), [EP], RUN, SID, 0, WHOSE).record(0)
    assert said == parse_record(record)
