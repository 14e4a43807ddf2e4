"""`StopLook` (client/stop_look.py): what a `Predictor`'s lookup reads of ``rank_0.json``
is what the plain read says (`stop_text`, `stopped_story`: the oracle) across every
change of the file, and an unchanged file is not read again (a look read and parsed it
at every look, up to 4 a second per waiting request)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from melissa_trainer.client import stop_look
from melissa_trainer.client.predict_lookup import stop_text, stopped_story
from melissa_trainer.client.stop_look import StopLook
from melissa_trainer.stream.serving_rendezvous import NO_SERVER


def plain(rv: Path, run_id: str | None, why: str, served: bool) -> tuple[object, ...]:
    text = stop_text(rv)
    return text, stopped_story(rv, run_id, why, served, text)


def record(code: str, message: str) -> str:
    reason = {"code": code, "message": message}
    return json.dumps({"stopped": True, "run_id": "run-a", "stop_record": {"reason": reason}})


@pytest.mark.timeout(30)
def test_every_look_says_what_the_plain_read_says(tmp_path: Path) -> None:
    look = StopLook()
    path = tmp_path / "rank_0.json"

    def same(run_id: str | None = "run-a", why: str = NO_SERVER, served: bool = False) -> None:
        assert look.look(tmp_path, run_id, why, served) == plain(tmp_path, run_id, why, served)

    same()  # (no file)
    aside = tmp_path / "aside"
    aside.write_text(record("preempted", "SIGTERM"))
    os.replace(aside, path)  # (as the trainer writes it: a new inode)
    same()
    same()  # (unchanged: kept)
    same(run_id="run-b")  # (another run asking: its own story)
    same(why="no trainer serves predictions there (yet)", served=True)
    aside.write_text(record("end", "max_steps 5 reached"))
    os.replace(aside, path)
    same()
    path.write_text(record("end", "end of stream, AAAA"))  # (in place: the same inode)
    same()
    st = path.stat()
    path.write_text(record("end", "end of stream, BBBB"))  # (the same size too)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # (its mtime later)
    same()
    path.write_text("{not json")  # (being written)
    same()
    path.unlink()
    same()


@pytest.mark.timeout(30)
def test_an_unchanged_file_is_not_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[object] = []

    def counted(directory: object) -> str:
        reads.append(directory)
        return stop_text(directory)  # type: ignore[arg-type]

    monkeypatch.setattr(stop_look, "stop_text", counted)
    (tmp_path / "rank_0.json").write_text(record("preempted", "SIGTERM"))
    look = StopLook()
    first = look.look(tmp_path, "run-a", NO_SERVER, False)
    for _ in range(5):
        assert look.look(tmp_path, "run-a", NO_SERVER, False) == first
    assert len(reads) == 1, reads
    aside = tmp_path / "aside"
    aside.write_text(record("preempted", "SIGTERM"))  # (the same text, a new file)
    os.replace(aside, tmp_path / "rank_0.json")
    assert look.look(tmp_path, "run-a", NO_SERVER, False) == first
    assert len(reads) == 2, reads
