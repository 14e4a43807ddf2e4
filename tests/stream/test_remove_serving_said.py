"""`serving_rendezvous.remove_serving` never raises, but a serve file it could not
remove (or read) is said at WARNING, with the error: a predictor reading it later
dials an endpoint nobody serves, and nothing in the trainer's log said why (before:
the OSError was dropped). A missing file, or a newer trainer's, is not a failure."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from melissa_trainer import wire as protocol
from melissa_trainer.stream.serving_rendezvous import remove_serving, serve_file, write_serving

pytestmark = pytest.mark.timeout(30)

ENDPOINT = "tcp://127.0.0.1:9"
LOGGER = "melissa_trainer.stream.serving_rendezvous"


def published(directory: Path, endpoint: str = ENDPOINT) -> Path:
    specs = protocol.field_specs({"q": ((4,), "float32")})
    return write_serving(directory, 0, 1, endpoint, specs, "run-a", None)


def test_a_file_that_cannot_be_removed_is_said_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = published(tmp_path)

    def refuse(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError("unlink refused")

    monkeypatch.setattr(Path, "unlink", refuse)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        remove_serving(tmp_path, 0, ENDPOINT)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1, said
    assert path.name in said[0] and "unlink refused" in said[0], said
    assert path.exists()


@pytest.mark.parametrize("text", ["{not json", "[1]"])  # ("[1]": raised AttributeError)
def test_an_unreadable_file_is_said_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, text: str
) -> None:
    serve_file(tmp_path, 0).write_text(text)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        remove_serving(tmp_path, 0, ENDPOINT)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(said) == 1 and serve_file(tmp_path, 0).name in said[0], said


def test_a_missing_or_newer_trainers_file_is_left_without_a_word(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        remove_serving(tmp_path, 0, ENDPOINT)  # (none: nothing to remove)
        path = published(tmp_path, "tcp://127.0.0.1:10")
        remove_serving(tmp_path, 0, ENDPOINT)
    assert caplog.records == []
    assert path.exists()
    remove_serving(tmp_path, 0, "tcp://127.0.0.1:10")  # (its own: removed)
    assert not path.exists()


def test_its_own_file_holding_a_long_integer_is_removed(tmp_path: Path) -> None:
    """Failed before: json.loads refused an integer of 4301 digits (left, said), where
    every other reader of the file, C's too, reads it (`rank_bounds.read_file`)."""
    path = published(tmp_path)
    path.write_text(path.read_text().replace("{", '{"n": ' + "7" * 4301 + ", ", 1))
    remove_serving(tmp_path, 0, ENDPOINT)
    assert not path.exists()


def test_a_file_of_no_object_is_said_in_the_c_clients_words(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Failed before: "('list' object has no attribute 'get')"."""
    path = serve_file(tmp_path, 0)
    path.write_text(f'["{ENDPOINT}"]')
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        remove_serving(tmp_path, 0, ENDPOINT)
    assert path.exists()
    assert f"could not remove {path} (not a JSON object at character 0)" in caplog.text
