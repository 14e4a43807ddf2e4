"""The Python client reads a stop record's strings and a serve file's name as the C
client does (the C rules are the safe ones: tests/c/test_c_stop_words_cut.py compares
the two clients' words):

* a reason's code is quoted at most 32 characters wherever it is quoted (`said_code`):
  a late client's words (`endpoints._why_stopped`) quoted it whole, C its first 32
  bytes (a non-ASCII code cut inside a character);
* a string holding ``\\u0000`` is read up to it (`as_c_reads`): a C string ends there,
  Python quoted the rest;
* a serve file's name is ``serve_`` and 1 to 9 ASCII digits: ``\\d+`` took any Unicode
  digits, and any count, which the C client skipped;
* a close reads a record's code, message and run id, and the file's endpoint, up to a
  NUL too (`stop_record_read.c_string`): it refused a record whose code C read as "end".

The oracles are literal strings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from melissa_trainer.client.predict_lookup import stop_reason
from melissa_trainer.client.stopped import StopRecords
from melissa_trainer.stream.endpoints import fetch_rendezvous, mark_stopped, write_rendezvous
from melissa_trainer.stream.serving_rendezvous import NO_SERVER, read_serving, write_serving
from melissa_trainer.wire import field_specs

LONG_CODE = "é" * 40  # (80 bytes of UTF-8: C cut 32 bytes, 16 characters)


def stopped_words(rv: Path, code: str, message: str) -> str:
    """A late client's failure (`fetch_rendezvous`) on one rank stopped for (code,
    message)."""
    write_rendezvous(rv, 0, 1, "tcp://127.0.0.1:9", {"run_id": "run-a"})
    mark_stopped(rv, 0, "tcp://127.0.0.1:9", {"reason": {"code": code, "message": message}})
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=0.05)
    return str(caught.value)


@pytest.mark.timeout(30)
def test_a_late_clients_words_quote_a_code_at_most_32_characters(tmp_path: Path) -> None:
    words = stopped_words(tmp_path, LONG_CODE, "x")
    assert "rank_0.json: its trainer stopped (" + "é" * 32 + ") (a trainer" in words, words


@pytest.mark.timeout(30)
def test_a_late_clients_words_read_a_message_up_to_a_nul(tmp_path: Path) -> None:
    words = stopped_words(tmp_path, "error", "boom\x00tail")
    assert "its trainer stopped (error: boom) (a trainer" in words, words
    assert "tail" not in words, words


@pytest.mark.timeout(30)
def test_a_predictors_words_read_a_code_and_a_message_up_to_a_nul(tmp_path: Path) -> None:
    record = {"reason": {"code": "end\x00x", "message": "end of stream\x00, tail"}}
    text = json.dumps({"stopped": True, "run_id": "run-a", "stop_record": record})
    said = stop_reason(tmp_path, "run-a", text)
    assert said is not None
    assert said[0] == "end: end of stream", said
    assert said[1].startswith("the run ended at its stream's end"), said  # (as C decides)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ["serve_\u0660.json", "serve_0000000000.json"])
def test_a_serve_file_name_is_1_to_9_ascii_digits(tmp_path: Path, name: str) -> None:
    """An Arabic-Indic zero, ten digits: no serve file, as C reads the directory."""
    specs = field_specs({"u": ((4,), "float32")})
    write_serving(tmp_path, 0, 1, "tcp://127.0.0.1:1", specs, "run-a", None)
    (tmp_path / "serve_0.json").rename(tmp_path / name)
    entry, why = read_serving(tmp_path, 0, None)
    assert entry is None and why == NO_SERVER, (entry, why)


@pytest.mark.timeout(30)
def test_a_close_reads_a_records_strings_and_its_endpoint_up_to_a_nul(tmp_path: Path) -> None:
    """The code, message and run id of a stop record, and the stopped file's endpoint,
    as C reads them (clients/c/src/stop_record.c: C strings end at the NUL): the close
    and a blocked send decide on the record C decides on (Python refused it: "bad
    reason"; tests/c/test_c_close_for_good.py compares the two clients' words)."""
    record = build_record_of("end\x00x", "max_steps 7 reached\x00, tail", "run-a\x00x")
    entry = {"stopped": True, "endpoint": "tcp://127.0.0.1:9\x00junk", "stop_record": record}
    (tmp_path / "rank_0.json").write_text(json.dumps(entry))
    records = StopRecords(str(tmp_path), ["tcp://127.0.0.1:9"], "run-a", 3, 0, "a client")
    got = records.record(0)
    assert got is not None
    assert (got.run_id, got.reason.code, got.reason.message) == (
        "run-a",
        "end",
        "max_steps 7 reached",
    )


def build_record_of(code: str, message: str, run_id: str) -> dict[str, object]:
    """A complete stop record of `run_id` stopped for (code, message), listing nothing."""
    reason = {"code": code, "message": message}
    return {"version": 1, "run_id": run_id, "reason": reason, "finished": [], "byes": [],
            "complete": True}  # fmt: skip
