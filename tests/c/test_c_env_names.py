"""A misspelt MELISSA_TRAINER_* variable is named (clients/c/src/env_names.c).

Found in a user trial: ``MELISSA_TRAINER_RENDEVOUS=... mpiexec -n 2 ./solver`` said only
"no receiver endpoint: ... set MELISSA_TRAINER_ENDPOINTS (...) or
MELISSA_TRAINER_RENDEZVOUS (...)", and a misspelt optional variable
(``MELISSA_TRAINER_REPLAY_BYTE``) was silently ignored. Now `mt_client_start` says, on
stderr, rank 0 only and once per process, the Python client's sentence naming each
MELISSA_TRAINER_* variable that no part of melissa-trainer reads, with the known one it
is like ("MELISSA_TRAINER_RENDEVOUS (did you mean MELISSA_TRAINER_RENDEZVOUS?) is set,
which melissa-trainer does not read"), and the "no receiver endpoint" and "no
simulation id" errors of every rank end with "; but " and that sentence.

The oracle of the sentence: `melissa_trainer.client.env_names.unknown_note` where the
package has it, else its rule written here with difflib (sorted names; each compared
without the prefix, `get_close_matches(cutoff=0.7)`).

The tables: the names the C client reads equal the getenv names of its sources (a
new variable cannot be forgotten), and with the names other parts read they cover every
MELISSA_TRAINER_* name the Python package defines (a launcher's variable in a solver's
environment is not a mistake)."""

from __future__ import annotations

import difflib
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
    # (the table is of the prefix, which a misspelling is judged against; the one other
    # name, Slurm's, is read by rerun.c: listed here, so that a new one is seen too)
    others = {name for name in read if not name.startswith("MELISSA_TRAINER_")}
    assert others == {"SLURM_RESTART_COUNT"}, others
    assert table("MT_ENV_READ") == read - others


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


PREFIX = "MELISSA_TRAINER_"


def python_note(env: dict[str, str]) -> str:
    """What the Python client says of `env`'s unknown variables (the module docstring)."""
    try:
        from melissa_trainer.client.env_names import unknown_note
    except ImportError:
        pass
    else:
        return str(unknown_note(env))
    known = table("MT_ENV_READ") | table("MT_ENV_ELSEWHERE")
    unknown = sorted(k for k in env if k.startswith(PREFIX) and k not in known)
    if not unknown:
        return ""
    suffixes = sorted(k[len(PREFIX) :] for k in known)
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name[len(PREFIX) :], suffixes, n=1, cutoff=0.7)
        parts.append(f"{name} (did you mean {PREFIX}{close[0]}?)" if close else name)
    verb = "is" if len(parts) == 1 else "are"
    return f"{', '.join(parts)} {verb} set, which melissa-trainer does not read"


@pytest.mark.e2e
@pytest.mark.timeout(120)
def test_a_misspelt_rendezvous_is_named_by_an_mpi_solver(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The user's trial: two ranks, MELISSA_TRAINER_RENDEVOUS and a misspelt optional
    one. Rank 0 says them once on stderr (not rank 1: one environment for both), and
    each rank's error ends with the same sentence."""
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
    note = (
        "MELISSA_TRAINER_RENDEVOUS (did you mean MELISSA_TRAINER_RENDEZVOUS?), "
        "MELISSA_TRAINER_REPLAY_BYTE (did you mean MELISSA_TRAINER_REPLAY_BYTES?) are set, "
        "which melissa-trainer does not read"
    )
    assert python_note(env) == note  # (the oracle)
    for rank in (0, 1):
        assert f"rank {rank}: start: {NO_ENDPOINT}; but {note}\n" in err, err
    assert err.count(f"melissa_trainer: {note}\n") == 1, err
    assert err.count("WORKER") == 0, err


#: names a user may misspell, or set on purpose; one that no known name is like
NAMES = [
    "MELISSA_TRAINER_SERVE_ENDPOINT", "MELISSA_TRAINER_SIMULATIONID", "MELISSA_TRAINER_SIM_ID",
    "MELISSA_TRAINER_KEYS", "MELISSA_TRAINER_RUNID", "MELISSA_TRAINER_LAUNCH",
    "MELISSA_TRAINER_ENDPOINT", "MELISSA_TRAINER_", "MELISSA_TRAINER_endpoints",
    "MELISSA_TRAINER_PARAMETER", "MELISSA_TRAINER_" + "X" * 300, "MELISSA_TRAINER_ATEMPT",
]  # fmt: skip


def starts_twice(exe: Path, tmp_path: Path, env: dict[str, str]) -> tuple[list[str], str]:
    """mt_script starting a client without an id, then twice without endpoints, then with
    them (then aborting it), with `env`: the starts' "status message" and stderr."""
    script = tmp_path / "starts.txt"
    script.write_text(
        "field u 1 1 2\nstart\nid 3\nstart\nendpoints tcp://127.0.0.1:9\nstart\nabort\n"
    )
    proc = subprocess.run(
        [str(exe), str(script)], capture_output=True, text=True, timeout=60,
        env=clean_env(**env), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = dict(line.split(" ", 1) for line in proc.stdout.splitlines())
    return [lines["2"], lines["4"], lines["6"]], proc.stderr


def check_one_process(exe: Path, tmp_path: Path, extra: dict[str, str]) -> str:
    env = {name: "1" for name in NAMES} | {"MELISSA_TRAINER_OUTPUT_LOCK": "off", **extra}
    note = python_note(env)
    assert "MELISSA_TRAINER_SERVE_ENDPOINT (did you mean MELISSA_TRAINER_SERVE_ENDPOINTS?)" in note
    assert "MELISSA_TRAINER_SIM_ID, " in note and "OUTPUT_LOCK" not in note  # (the oracle)
    starts, err = starts_twice(exe, tmp_path, env)
    assert starts[0] == (
        f"{MT_EENV} no simulation id: call mt_set_simulation_id, or set "
        f"MELISSA_TRAINER_SIMULATION_ID; but {note}"
    )
    assert starts[1] == f"{MT_EENV} {NO_ENDPOINT}; but {note}"
    assert starts[2].startswith("0"), starts
    assert err.count(f"melissa_trainer: {note}\n") == 1, err  # (three starts: once)
    return err


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_unknown_names_are_said_once_per_process_in_the_python_clients_words(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Three starts in one process (two fail: the sentence in each error), the sentence
    said once, word for word the Python client's; a trainer's name not at all; a rank
    other than 0 says nothing on stderr, its error says it."""
    check_one_process(script_exe, tmp_path, {})
    script = tmp_path / "rank1.txt"
    script.write_text("id 3\nrank 1 2\nfield u 1 1 2\npart u 0 2\nstart\nabort\n")
    proc = subprocess.run(
        [str(script_exe), str(script)], capture_output=True, text=True, timeout=60,
        env=clean_env(MELISSA_TRAINER_RENDEVOUS="x"), check=False,
    )  # fmt: skip
    assert "did you mean MELISSA_TRAINER_RENDEZVOUS?) is set" in proc.stdout, proc.stdout
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
