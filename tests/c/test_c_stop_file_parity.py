"""A ``rank_0.json`` marked stopped read alike by the C client's lookup and the Python
one (clients/c/src/missing_dir.c mt_stop_reason; melissa_trainer/client/predict_lookup.py
stop_reason, through `rank_bounds.read_object`, the one reader of rendezvous files):
the same bytes in, the same words out, whether the file is a stop, not JSON, not a JSON
object or not UTF-8.

Failed before: C took a file with white space before its object for no stop ("no
trainer serves predictions there"), Python for a stop; Python's json.loads refused a
file holding an integer of 4301 digits (no stop), C read it (a stop). The oracle: the
words written here (a stop's, or no trainer's), and each client's against the other's.

A close's stop record (stop_record.c look_at; client/stopped.py `StopRecords`) in a file
holding an integer of 4301 digits: the same sentence (Python read no record there).

Real parts: the compiled client (`clients/c/tests/mt_script.c`) in its own process, the
Python `Predictor` in this one; the files written by hand (bytes no trainer writes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import test_c_close_stop_record
import zmq
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)
from predict_script import zctx  # noqa: F401 (a fixture)
from test_c_close_receipt import RUN, sink  # noqa: F401 (a fixture)
from test_c_close_stop_record import stopped_close
from test_c_env_parity import ASK, RENDEZVOUS, by_hand  # noqa: F401
from test_c_stop_not_needed import MT_ETIMEDOUT, SID, ended_ingest
from test_c_stop_words_cut import python_words

from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.endpoints import mark_stopped
from melissa_trainer.stream.stop_record import StopReason, build_record
from melissa_trainer.stream.stop_record_read import parse_record

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]  # (a build and a process)

RECORD = '"stop_record": {"reason": {"code": "error", "message": "boom"}}'
STOP = f'{{"stopped": true, {RECORD}}}'
#: a stop's words (both clients), and no trainer's
STOPPED = "the trainer that ran there stopped (error: boom; "
NONE = "no trainer serves predictions there"
#: rank_0.json's bytes -> whether both clients read a stop there
FILES: dict[str, tuple[bytes, bool]] = {
    "a stop": (STOP.encode(), True),
    "white space before": (b" \n\t" + STOP.encode(), True),
    "a member of 4301 digits": (f'{{"n": {"7" * 4301}, {STOP[1:]}'.encode(), True),
    "stopped repeated, true last": (f'{{"stopped": false, {STOP[1:]}'.encode(), True),
    "stopped repeated, false last": (f'{STOP[:-1]}, "stopped": false}}'.encode(), False),
    "a string not UTF-8": (
        f'{STOP[:-1]}, "x": "\udcff"}}'.encode("utf-8", "surrogateescape"),
        False,
    ),
    "a UTF-8 BOM before": (b"\xef\xbb\xbf" + STOP.encode(), False),
    "not JSON": (STOP[:-1].encode(), False),
    "an array": (f"[{STOP}]".encode(), False),
    "empty": (b"", False),
}


@pytest.mark.parametrize("name", list(FILES))
def test_a_stopped_rank_file_is_read_by_c_as_by_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    by_hand: None,  # noqa: F811
    name: str,
) -> None:
    data, stopped = FILES[name]
    rv = tmp_path / "rv"
    rv.mkdir()
    (rv / "rank_0.json").write_bytes(data)
    got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, {RENDEZVOUS: str(rv)})
    python = python_words(rv)
    assert (STOPPED in python) is stopped, python  # (the literal oracle)
    assert stopped or f"within 1.0 s: {NONE}" in python, python
    assert got[7][1] == python, (got, python)


def test_the_files_are_what_they_say() -> None:
    """The oracle's own check: the stops are JSON that Python reads as one."""
    for name, (data, stopped) in FILES.items():
        if stopped and name != "white space before":
            entry = json.loads(data.decode(), parse_int=str)
            assert entry["stopped"] is True, name


def marked_with_a_long_integer(
    directory: str | os.PathLike[str], rank: int, endpoint: str, record: dict | None = None
) -> None:
    """`mark_stopped`, then the file rewritten (renamed over) with a member of 4301
    digits before the others: bytes no trainer writes, that C read and Python did not."""
    mark_stopped(directory, rank, endpoint, record)
    path = Path(directory) / f"rank_{rank}.json"
    aside = path.with_suffix(".long")
    aside.write_text(f'{{"n": {"7" * 4301}, ' + path.read_text()[1:])
    os.replace(aside, path)


@pytest.mark.timeout(120)
def test_a_close_reads_a_stop_record_beside_a_long_integer_as_python(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same file read by the C client's close (stop_record.c look_at) and the
    Python one's (`StopRecords`): the same sentence. Failed before: Python read no
    record in it (json.loads refused the integer)."""
    monkeypatch.setattr(test_c_close_stop_record, "mark_stopped", marked_with_a_long_integer)
    record = build_record(ended_ingest(2), RUN, StopReason("end", "end of stream"))
    code, message, _ = stopped_close(script_exe, tmp_path, sink, zctx, record)
    assert code == MT_ETIMEDOUT, message
    assert len((tmp_path / "rank_0.json").read_text()) > 4301  # (the file both read)
    endpoint = str(json.loads((tmp_path / "rank_0.json").read_text(), parse_int=str)["endpoint"])
    said = StopRecords(str(tmp_path), [endpoint], RUN, SID, 0, "w")
    read = said.record(0)
    assert read == parse_record(record)  # (the oracle: the record written)
    python = said.not_needed(0, read)
    head, tail = python.split(" (catch SimulationNotNeeded to exit 0)")
    assert head in message and tail in message, (python, message)


@pytest.mark.timeout(120)
def test_a_close_reads_a_stop_record_naming_its_launch_as_python(
    script_exe: Path,  # noqa: F811
    sink: str,  # noqa: F811
    zctx: zmq.Context,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A record naming the torchrun launch that wrote it (``launch``, since 2026-12-07:
    `stream.launch_identity`), read by the C client's close and the Python one's: the
    field ignored by both, the same sentence as the record says."""
    record = build_record(ended_ingest(2), RUN, StopReason("end", "end of stream"))
    record["launch"] = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
    code, message, _ = stopped_close(script_exe, tmp_path, sink, zctx, record)
    assert code == MT_ETIMEDOUT, message
    endpoint = str(json.loads((tmp_path / "rank_0.json").read_text())["endpoint"])
    said = StopRecords(str(tmp_path), [endpoint], RUN, SID, 0, "w")
    read = said.record(0)
    assert read == parse_record(record)  # (the oracle: the record written)
    python = said.not_needed(0, read)
    head, tail = python.split(" (catch SimulationNotNeeded to exit 0)")
    assert head in message and tail in message, (python, message)
