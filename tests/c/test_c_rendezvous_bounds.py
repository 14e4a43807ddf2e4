"""A rank file out of bounds, C as Python, word for word (clients/c/src/rendezvous_ranks.c,
melissa_trainer/stream/rank_bounds.py): a ``world_size`` that is not a whole number 1 to
10**9, or a rank that is not its name's or not under it, is refused by name, and the
missing ranks are listed up to 10, then counted.

Failed before: a ``world_size`` of 10**12 had the C client list its missing ranks, for
ever (its time or memory ran out); a rank_999999999.json of a world of 10**9 had it
allocate an entry per rank up to it ("out of memory"); 12 ranks missing were all listed;
the rank and world_size of a file were cast from a double (undefined for 1e300), and the
others were refused as "invalid (THE FILE'S TEXT)". The solver runs in bounded memory
(tests/bounded_rendezvous.py); the oracle: the words written out there, and Python's on
the same directory (read in bounded memory too)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from bounded_rendezvous import REFUSED, bounded, python_words, write_file
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import SANITIZER_ENV, c_client  # noqa: F401
from test_c_killed_trainer import script

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]  # (a build and processes)


def c_words(exe: Path, rv: Path, tmp_path: Path) -> str:
    """The C solver's start's error on `rv` (0.2 s of rendezvous timeout), run in
    bounded memory, within 60 s."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    proc = subprocess.run(
        [str(exe), str(script(rv, tmp_path, 0.2))], capture_output=True, text=True,
        timeout=60, env={**clean, **SANITIZER_ENV}, preexec_fn=bounded, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [s for s in proc.stdout.splitlines() if s.startswith("4 ")]  # (the start)
    _, status, message = line.split(" ", 2)
    assert status != "0", message
    return message


@pytest.mark.parametrize("file", list(REFUSED), ids=lambda f: "-".join(f))
def test_a_file_out_of_bounds_is_refused_by_c_as_by_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    file: tuple[str, str, str],
) -> None:
    rv = tmp_path / "rendezvous"
    write_file(rv, *file)
    said = c_words(script_exe, rv, tmp_path)
    assert f"0.2 s: {file[0]} invalid ({REFUSED[file]}) (is the trainer running" in said, said
    assert said == python_words(rv, 0.2)


@pytest.mark.parametrize(
    ("world", "rank", "missing"),
    [
        (3, 1, "[0, 2]"),  # (today's words, whole)
        (12, 3, "[0, 1, 2, 4, 5, 6, 7, 8, 9, 10, ... (11 in all)]"),
        (10**9, 10**9 - 1, "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (999999999 in all)]"),
    ],
)
def test_missing_ranks_are_listed_up_to_ten_then_counted_by_c_as_by_python(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    world: int,
    rank: int,
    missing: str,
) -> None:
    rv = tmp_path / "rendezvous"
    write_file(rv, f"rank_{rank}.json", str(rank), str(world))
    said = c_words(script_exe, rv, tmp_path)
    assert f"0.2 s: world_size {world}, ranks {missing} missing (is the" in said, said
    assert said == python_words(rv, 0.2)
