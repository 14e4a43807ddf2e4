"""The C client's start takes the endpoints of the rendezvous files it checked: a resumed
trainer's rewrite of ``rank_0.json`` landing between the client's read of the endpoints
(`mt_rendezvous_read`) and its read of the trainer's pid (trainer_alive.c) had the live
new trainer checked and the killed one's endpoint taken (hrev4: every send then returned
MT_OK and the close failed 180 s later; the Python client reads each file once).

Failed before: the endpoint taken was the killed trainer's. The rewrite is made to land
exactly there by a wrapper of the client's file reader (``-Wl,--wrap=mt_read_file``,
the rename a trainer's `write_rendezvous` does, on the second read of the file). Since
hmiss the look that reads the endpoints judges the pid of the same reading too (as
Python: `mt_rendezvous_look`), so the killed trainer's file is refused at that look and
the rewrite, landing at the second, is taken at the next look (the harness looks twice,
as `mt_fetch_endpoints` would: never the killed trainer's endpoint); the
files are written by the receiver's own writer (`write_rendezvous`), the old one by a
process that has ended. Oracle: the endpoint each file was written with. Controls: no
rewrite, the killed trainer's file is refused; a live trainer's file is taken."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from compiled import C_SOURCE, c_toolchain_missing
from tooling import missing_tool

from melissa_trainer.stream.endpoints import fetch_rendezvous, write_rendezvous

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]  # (a build and processes)

ROOT = Path(__file__).resolve().parents[2]
HARNESS = textwrap.dedent(
    r"""
    #include "internal.h"
    #include <stdio.h>
    #include <stdlib.h>
    #include <string.h>
    char *__real_mt_read_file(const char *path);
    static int reads = 0, all_reads = 0;
    /* the trainer's rewrite (aside, then renamed), on the second read of rank_0.json */
    char *__wrap_mt_read_file(const char *path) {
        const char *text = getenv("NEW_JSON");
        ++all_reads;
        if (text != NULL && strstr(path, "rank_0.json") != NULL && ++reads == 2) {
            char tmp[4200];
            snprintf(tmp, sizeof tmp, "%s.new", path);
            FILE *f = fopen(tmp, "w");
            if (f == NULL) return NULL;
            fputs(text, f);
            fclose(f);
            rename(tmp, path);
        }
        return __real_mt_read_file(path);
    }
    int main(int argc, char **argv) {
        (void)argc;
        mt_rendezvous rv;
        mt_buf problem = {0};
        mt_status st = mt_rendezvous_read_live(argv[1], &rv, &problem, NULL);
        if (getenv("COUNT_READS") != NULL) printf("reads %d\n", all_reads); /* (one look) */
        if (st == MT_ERENDEZVOUS && getenv("NEW_JSON") != NULL) { /* (the next look) */
            problem.len = 0;
            st = mt_rendezvous_read_live(argv[1], &rv, &problem, NULL);
        }
        printf("%d %s\n", (int)(st != MT_OK), st == MT_OK ? rv.endpoints[0] : problem.data);
        if (st == MT_OK) mt_rendezvous_free(&rv);
        free(problem.data);
        return 0;
    }
    """
)
OLD, NEW = "tcp://127.0.0.1:5001", "tcp://127.0.0.1:5002"


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The client's sources and the harness, linked with the wrapped reader."""
    reason = c_toolchain_missing()
    if reason is not None:
        missing_tool(reason)
    build = tmp_path_factory.mktemp("reread")
    (build / "harness.c").write_text(HARNESS)
    zmq = subprocess.run(
        ["pkg-config", "--cflags", "--libs", "libzmq"], capture_output=True, text=True, check=True
    ).stdout
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler is not None
    sources = sorted(str(s) for s in (C_SOURCE / "src").glob("*.c"))
    exe = build / "harness"
    argv = [compiler, "-std=c11", "-O0", f"-I{C_SOURCE / 'include'}", f"-I{C_SOURCE / 'src'}",
            str(build / "harness.c"), *sources, "-Wl,--wrap=mt_read_file", "-o", str(exe),
            *shlex.split(zmq), "-lm", "-lpthread"]  # fmt: skip
    subprocess.run(argv, check=True, timeout=240, capture_output=True)
    return exe


def killed_trainers_files(tmp_path: Path) -> Path:
    """A rendezvous written by a trainer (the receiver's writer) that has ended since."""
    rv = tmp_path / "rendezvous"
    code = (
        "import sys; from melissa_trainer.stream.endpoints import write_rendezvous as w; "
        f"w(sys.argv[1], 0, 1, {OLD!r}, {{'run_id': 'r1'}})"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(rv)],
        check=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return rv


def run(exe: Path, rv: Path, new_json: str | None = None, count: bool = False) -> str:
    """The harness's output on `rv` (`count`: the reads of its first look first)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MELISSA_")}
    if new_json is not None:
        env["NEW_JSON"] = new_json
    if count:
        env["COUNT_READS"] = "1"
    return subprocess.run(
        [str(exe), str(rv)], capture_output=True, text=True, timeout=60, env=env, check=True
    ).stdout


def taken(exe: Path, rv: Path, new_json: str | None) -> tuple[bool, str]:
    """(refused, the endpoint taken or the words) of the client's start reading on `rv`."""
    refused, said = run(exe, rv, new_json).rstrip("\n").split(" ", 1)
    return refused == "1", said


def test_a_rewrite_between_the_reads_is_taken_not_the_killed_trainer_s_endpoint(
    harness: Path, tmp_path: Path
) -> None:
    rv = killed_trainers_files(tmp_path)
    # (the resumed trainer: this process, alive; its file as the writer makes it)
    new = write_rendezvous(tmp_path / "new", 0, 1, NEW, {"run_id": "r1"}).read_text()
    assert taken(harness, rv, new) == (False, NEW)
    assert f'"{NEW}"' in (rv / "rank_0.json").read_text()  # (the rewrite landed)


def test_without_a_rewrite_the_killed_trainer_s_file_is_refused_and_a_live_one_taken(
    harness: Path, tmp_path: Path
) -> None:
    refused, said = taken(harness, killed_trainers_files(tmp_path), None)
    assert refused and "is gone without marking it stopped" in said, said
    live = tmp_path / "live"
    write_rendezvous(live, 0, 1, NEW, {"run_id": "r2"})
    assert taken(harness, live, None) == (False, NEW)


def test_one_look_reads_each_file_once(harness: Path, tmp_path: Path) -> None:
    """A look at a complete rendezvous of live trainers read each file three times (the
    endpoints, the pids again, a third reading to check the two agreed: hmisc), as
    Python reads it once. Failed before: 9 reads of 3 files."""
    rv = tmp_path / "live"
    for rank in range(3):  # (this process: a live trainer on this machine, not dialled)
        write_rendezvous(rv, rank, 3, f"tcp://127.0.0.1:{5001 + rank}", {"run_id": "r3"})
    counted, said = run(harness, rv, count=True).splitlines()
    assert said == "0 tcp://127.0.0.1:5001", said  # (taken)
    assert counted == "reads 3", counted


def test_a_rank_of_over_9_digits_is_refused_by_c_as_by_python(
    harness: Path, tmp_path: Path
) -> None:
    """A file named rank_N.json of a rank over 9 digits: the C client skipped it unsaid
    and took the others (here a complete directory), Python read it (here, files that
    disagree on world_size). No trainer writes one: both refuse it now, unread, in the
    same words. Failed before: C took rank_0.json's endpoint."""
    rv = tmp_path / "rv"
    write_rendezvous(rv, 0, 1, OLD, {"run_id": "r4"})  # (this process: live)
    big = {"version": 1, "rank": 1234567890, "world_size": 1234567891, "endpoint": NEW}
    (rv / "rank_01234567890.json").write_text(json.dumps(big))
    words = (
        "rank_01234567890.json invalid (its rank 1234567890 has over 9 digits: no "
        "trainer has so many ranks)"
    )
    assert taken(harness, rv, None) == (True, words)
    with pytest.raises(TimeoutError) as caught:
        fetch_rendezvous(rv, timeout=0.0, alive_only=True)
    assert f": {words} (is the trainer running" in str(caught.value), caught.value
