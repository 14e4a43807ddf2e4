"""A misspelt ``MELISSA_TRAINER_*`` variable is named (trial F4): before, a
``MELISSA_TRAINER_RENDEVOUS`` gave "no receiver endpoint: ... set
MELISSA_TRAINER_ENDPOINTS or MELISSA_TRAINER_RENDEZVOUS" without naming it, and a
misspelt optional one (``MELISSA_TRAINER_REPLAY_BYTE``) was silently ignored. The list of
known variables is checked against the names the package's code and the C client's
sources hold."""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import pytest

import melissa_trainer
from melissa_trainer.client import Client, env_names
from melissa_trainer.client.env_names import KNOWN, unknown_note

PACKAGE = Path(melissa_trainer.__file__).parent
C_SOURCES = PACKAGE.parent / "clients" / "c"
NAME = re.compile(r"MELISSA_TRAINER_[A-Z0-9_]+")


def names_in_package() -> set[str]:
    """Every string constant of the package's code that is a whole variable name."""
    found: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        if path.name == "env_names.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.update([node.value] if NAME.fullmatch(node.value) else [])
    return found


def test_the_known_list_is_the_names_the_code_holds() -> None:
    assert names_in_package() == KNOWN


@pytest.mark.skipif(not C_SOURCES.is_dir(), reason="no clients/c (an installed package)")
def test_the_known_list_covers_the_c_clients_names() -> None:
    c_names = {
        m
        for path in [*C_SOURCES.rglob("*.c"), *C_SOURCES.rglob("*.h")]
        for m in re.findall(r'"(MELISSA_TRAINER_[A-Z0-9_]+)"', path.read_text(errors="replace"))
    }
    assert "MELISSA_TRAINER_RENDEZVOUS" in c_names  # (the scan finds what getenv reads)
    assert c_names <= KNOWN, sorted(c_names - KNOWN)


def test_a_misspelt_variable_is_named_with_the_one_meant() -> None:
    env = {"MELISSA_TRAINER_RENDEVOUS": "/x", "MELISSA_TRAINER_ATTEMPT": "0", "PATH": "/bin"}
    assert unknown_note(env) == (
        "MELISSA_TRAINER_RENDEVOUS (did you mean MELISSA_TRAINER_RENDEZVOUS?) is set, which "
        "melissa-trainer does not read"
    )
    env = {"MELISSA_TRAINER_REPLAY_BYTE": "0", "MELISSA_TRAINER_FOO": "1"}
    assert unknown_note(env) == (
        "MELISSA_TRAINER_FOO, MELISSA_TRAINER_REPLAY_BYTE (did you mean "
        "MELISSA_TRAINER_REPLAY_BYTES?) are set, which melissa-trainer does not read"
    )
    assert unknown_note({name: "1" for name in KNOWN}) == ""


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in [k for k in os.environ if k.startswith("MELISSA_TRAINER_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(env_names, "_told", False)
    return monkeypatch


def test_the_clients_no_endpoint_error_names_the_misspelt_variable(
    clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    clean_env.setenv("MELISSA_TRAINER_SIMULATION_ID", "3")
    clean_env.setenv("MELISSA_TRAINER_RENDEVOUS", "/tmp/out/rendezvous")
    caplog.set_level(logging.WARNING, logger="melissa_trainer.client")
    with pytest.raises(ValueError, match="no receiver endpoint") as error:
        Client({"u": ((4,), "float32")})
    assert str(error.value).endswith(
        "; but MELISSA_TRAINER_RENDEVOUS (did you mean MELISSA_TRAINER_RENDEZVOUS?) is set, "
        "which melissa-trainer does not read"
    )
    with pytest.raises(ValueError, match="no receiver endpoint"):
        Client({"u": ((4,), "float32")})  # a second client: the warning is not said again
    warned = [r.getMessage() for r in caplog.records if "RENDEVOUS" in r.getMessage()]
    assert warned == [
        "MELISSA_TRAINER_RENDEVOUS (did you mean MELISSA_TRAINER_RENDEZVOUS?) is set, which "
        "melissa-trainer does not read"
    ]


def test_a_misspelt_simulation_id_is_named_in_its_error(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("MELISSA_TRAINER_SIMULATON_ID", "3")
    with pytest.raises(ValueError, match="no simulation id.*did you mean MELISSA_TRAINER_SIM"):
        Client({"u": ((4,), "float32")}, endpoints="tcp://127.0.0.1:9")


class RankOf2:
    """An mpi4py communicator's rank `rank` of 2 (the client reads no more of it before
    its "no receiver endpoint" error)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def Get_rank(self) -> int:  # noqa: N802 - mpi4py's names
        return self.rank

    def Get_size(self) -> int:  # noqa: N802
        return 2


def test_the_warning_is_said_on_client_rank_0_only_and_the_errors_on_every_rank(
    clean_env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Every rank of an MPI simulation has the same environment: the warning comes from
    rank 0 alone, as the C client's (a thousand ranks would log a thousand copies; before,
    each process logged it, whatever its rank), while each rank's error still ends with
    the sentence. Rank 1 starts first: it says nothing, and leaves rank 0 its say."""
    clean_env.setenv("MELISSA_TRAINER_SIMULATION_ID", "3")
    clean_env.setenv("MELISSA_TRAINER_RENDEVOUS", "/tmp/out/rendezvous")
    caplog.set_level(logging.WARNING, logger="melissa_trainer.client")
    note = unknown_note()
    assert note.startswith("MELISSA_TRAINER_RENDEVOUS (did you mean")  # (the oracle)

    def warned() -> list[str]:
        return [r.getMessage() for r in caplog.records if "RENDEVOUS" in r.getMessage()]

    for rank, said in ((1, []), (0, [note]), (1, [note]), (0, [note])):
        with pytest.raises(ValueError, match="no receiver endpoint") as error:
            Client({"u": ((4,), "float32")}, comm=RankOf2(rank))
        assert str(error.value).endswith(f"; but {note}"), (rank, error.value)
        assert warned() == said, rank  # (rank 0's, once per process)
