"""A misspelt MELISSA_TRAINER_* variable is named (clients/c/src/env_names.c).

Found in a user trial: ``MELISSA_TRAINER_RENDEVOUS=... mpiexec -n 2 ./solver`` said only
"no receiver endpoint: ... set MELISSA_TRAINER_ENDPOINTS (...) or
MELISSA_TRAINER_RENDEZVOUS (...)", and a misspelt optional variable
(``MELISSA_TRAINER_REPLAY_BYTE``) was silently ignored. Now `mt_client_start` says, on
stderr, rank 0 only and once per process, each MELISSA_TRAINER_* name that no part of
melissa-trainer reads, with the closest known name; the "no receiver endpoint" error of
every rank ends with "NAME is set: did you mean MELISSA_TRAINER_RENDEZVOUS?".

The tables: the names the C client reads equal the getenv names of its sources (a
new variable cannot be forgotten), and with the names other parts read they cover every
MELISSA_TRAINER_* name the Python package defines (a launcher's variable in a solver's
environment is not a mistake)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import C_SOURCE, REPO, SANITIZER_ENV, CClient, c_client, sanitized_c_client  # noqa: F401
from helpers import NO_MPI, find_mpiexec

SRC = C_SOURCE / "src"
MT_EENV = 6
NO_ENDPOINT = (
    "no receiver endpoint: call mt_set_endpoints, or set MELISSA_TRAINER_ENDPOINTS "
    "(comma-separated, e.g. tcp://127.0.0.1:5555) or MELISSA_TRAINER_RENDEZVOUS (the "
    "trainer's rendezvous directory, {output_dir}/rendezvous)"
)


def table(name: str) -> set[str]:
    """The names of env_names.c's array `name`."""
    text = (SRC / "env_names.c").read_text()
    found = re.search(rf"{name}\[\] = \{{(.*?)\}};", text, re.S)
    assert found is not None, name
    return set(re.findall(r'"(MELISSA_TRAINER_\w+)"', found.group(1)))


def getenv_names() -> set[str]:
    """Every name a source of src/ passes to getenv (a macro resolved in its file)."""
    names = set()
    for path in sorted(SRC.glob("*.c")):
        text = path.read_text()
        macros = dict(re.findall(r'#define\s+(\w+)\s+"([^"]+)"', text))
        for arg in re.findall(r"\bgetenv\(\s*([^)]*?)\s*\)", text):
            names.add(arg.strip('"') if arg.startswith('"') else macros[arg])
    return names


def test_the_table_equals_the_names_the_sources_read() -> None:
    read = getenv_names()
    assert len(read) >= 10, read  # (the oracle reads something)
    assert table("MT_ENV_READ") == read


def test_the_tables_hold_every_name_the_python_package_defines() -> None:
    python = set()
    for path in (REPO / "melissa_trainer").rglob("*.py"):
        python |= set(re.findall(r'"(MELISSA_TRAINER_[A-Z0-9_]+)"', path.read_text()))
    assert "MELISSA_TRAINER_WORKER" in python, python  # (the oracle reads something)
    known = table("MT_ENV_READ") | table("MT_ENV_ELSEWHERE")
    assert python <= known, python - known
    assert not table("MT_ENV_READ") & table("MT_ENV_ELSEWHERE")


SOLVER = r"""
#include <stdio.h>
#include <mpi.h>
#include "melissa_trainer.h"
#include "melissa_trainer_mpi.h"

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    mt_client *c = NULL;
    int status = 0;
    if (mt_client_create(&c) != MT_OK || mt_declare_field(c, "u", MT_FLOAT32, 0, NULL) != MT_OK
        || mt_declare_part_count(c, "u", rank == 0) != MT_OK) {
        fprintf(stderr, "rank %d: setup failed\n", rank);
        status = 2;
    } else if (mt_client_start_mpi(c, MPI_COMM_WORLD) != MT_OK) {
        fprintf(stderr, "rank %d: start: %s\n", rank, mt_client_error(c));
        status = 1;
    }
    if (c != NULL) mt_client_abort(c); /* (frees it, started or not) */
    MPI_Finalize();
    return status;
}
"""


def clean_env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    return {**base, **extra}


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_misspelt_rendezvous_is_named_by_an_mpi_solver(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The user's trial: two ranks, MELISSA_TRAINER_RENDEVOUS and a misspelt optional
    one. Rank 0 says each once on stderr (not rank 1: one environment for both), and
    each rank's error ends with the hint."""
    mpiexec = find_mpiexec()
    if mpiexec is None:
        pytest.skip(NO_MPI)
    source = tmp_path / "solver.c"
    source.write_text(SOLVER)
    solver = c_client.compile(source, tmp_path / "solver", mpi=True)
    env = clean_env(
        MELISSA_TRAINER_SIMULATION_ID="3",
        MELISSA_TRAINER_RENDEVOUS=str(tmp_path / "rendezvous"),
        MELISSA_TRAINER_REPLAY_BYTE="0",
        MELISSA_TRAINER_WORKER="w1",  # (the launcher's: not a mistake)
    )
    proc = subprocess.run(
        [mpiexec, "-n", "2", str(solver)],
        capture_output=True, text=True, timeout=90, env=env, check=False,
    )  # fmt: skip
    err = proc.stderr
    assert proc.returncode == 1, (proc.returncode, proc.stdout, err)
    hint = "; MELISSA_TRAINER_RENDEVOUS is set: did you mean MELISSA_TRAINER_RENDEZVOUS?"
    for rank in (0, 1):
        assert f"rank {rank}: start: {NO_ENDPOINT}{hint}\n" in err, err
    said = (
        "melissa_trainer: MELISSA_TRAINER_{} is set, but no part of melissa-trainer reads "
        "it: did you mean MELISSA_TRAINER_{}?\n"
    )
    assert err.count(said.format("RENDEVOUS", "RENDEZVOUS")) == 1, err
    assert err.count(said.format("REPLAY_BYTE", "REPLAY_BYTES")) == 1, err
    assert "WORKER" not in err, err


def said_by_one_process(exe: Path, tmp_path: Path, env: dict[str, str]) -> tuple[list, str]:
    """mt_script starting a client twice (then aborting it) with `env`: the two starts'
    (status, message) and stderr."""
    script = tmp_path / "twice.txt"
    script.write_text("id 3\nfield u 1 1 2\nstart\nendpoints tcp://127.0.0.1:9\nstart\nabort\n")
    proc = subprocess.run(
        [str(exe), str(script)], capture_output=True, text=True, timeout=60,
        env=clean_env(**env), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    return [lines["3"], lines["5"]], proc.stderr


def check_one_process(exe: Path, tmp_path: Path, env: dict[str, str]) -> str:
    env = {
        "MELISSA_TRAINER_SERVE_ENDPOINT": "tcp://127.0.0.1:7",
        "MELISSA_TRAINER_SIM_ID": "4",  # (no known name is close)
        "MELISSA_TRAINER_OUTPUT_LOCK": "off",  # (the trainer's: not a mistake)
        **env,
    }
    starts, err = said_by_one_process(exe, tmp_path, env)
    assert starts[0] == f"{MT_EENV} {NO_ENDPOINT}", starts  # (no hint: SERVE_ENDPOINTS)
    assert starts[1].startswith("0"), starts
    unread = "melissa_trainer: MELISSA_TRAINER_{} is set, but no part of melissa-trainer reads it"
    near = unread.format("SERVE_ENDPOINT") + ": did you mean MELISSA_TRAINER_SERVE_ENDPOINTS?\n"
    assert err.count(near) == 1, err
    far = unread.format("SIM_ID") + " (the C client reads MELISSA_TRAINER_ENDPOINTS, _RENDEZVOUS"
    assert err.count(far) == 1, err
    assert "OUTPUT_LOCK" not in err, err
    return err


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_an_unknown_name_is_said_once_per_process(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Two starts in one process (the first fails: no endpoint, no hint for a name close
    to another variable), each unknown name said once; a launcher's or trainer's name not
    at all; a rank other than 0 says nothing."""
    check_one_process(script_exe, tmp_path, {})
    script = tmp_path / "rank1.txt"
    script.write_text("id 3\nrank 1 2\nfield u 1 1 2\npart u 0 2\nstart\nabort\n")
    proc = subprocess.run(
        [str(script_exe), str(script)], capture_output=True, text=True, timeout=60,
        env=clean_env(MELISSA_TRAINER_RENDEVOUS="x"), check=False,
    )  # fmt: skip
    assert "did you mean MELISSA_TRAINER_RENDEZVOUS?" in proc.stdout, proc.stdout  # (the error)
    assert "MELISSA_TRAINER_RENDEVOUS" not in proc.stderr, proc.stderr


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_the_names_under_sanitizers(
    sanitized_c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    exe = sanitized_c_client.build_dir / "tests" / "mt_script"
    err = check_one_process(exe, tmp_path, dict(SANITIZER_ENV))
    assert "ERROR" not in err and "runtime error" not in err, err
