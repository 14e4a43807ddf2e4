"""``mt_strerror(MT_EENV)`` names what every MT_EENV is about. A solver prints it before
the message (examples/heat_c: "what: strerror" when there is no client, the Fortran
module's mt_finish when a message is empty), and it said "MELISSA_TRAINER_* environment
variable missing or malformed" where no variable is involved: an endpoint given by
``mt_set_serve_endpoints`` whose host does not resolve, a serve file's CURVE key that is
not one, a receiver that refused the handshake of a key given by
``mt_set_curve_server_key``. Now it names the three things an MT_EENV is about: a
MELISSA_TRAINER_* variable, an endpoint, a CURVE key (missing, malformed or refused).
The test runs each case with no MELISSA_* variable set, and checks the text names its
cause. Failed before (no "endpoint" nor "CURVE key" in the text)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from c_driver import run_script
from compiled import CClient

from melissa_trainer.stream.serving_rendezvous import write_serving
from melissa_trainer.wire import field_specs

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EENV = 6
PROGRAM = r"""
#include <stdio.h>
#include "melissa_trainer.h"
int main(void) {
    printf("%s\n", mt_strerror(MT_EENV));
    return 0;
}
"""
START = "id 7\nendpoints tcp://127.0.0.1:9\nfield u 1 1 4\nstart\n"
ASK = "input u 1 1 4 : 1 2 3 4\noutput y 1 4\npredict 20\nabort\n"


@pytest.fixture(scope="module")
def eenv_text(c_client: CClient, tmp_path_factory: pytest.TempPathFactory) -> str:
    """mt_strerror(MT_EENV), from a program built against the library."""
    out = tmp_path_factory.mktemp("strerror")
    (out / "strerror.c").write_text(PROGRAM)
    exe = c_client.compile(out / "strerror.c", out / "strerror")
    return subprocess.run([str(exe)], capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.mark.timeout(60)
def test_an_endpoint_whose_host_does_not_resolve(
    script_exe: Path,
    tmp_path: Path,
    eenv_text: str,
) -> None:
    got = run_script(script_exe, f"{START}serve tcp://no-such-host.invalid:5\n{ASK}", tmp_path)
    assert got[8][0] == MT_EENV and "does not resolve" in got[8][1], got
    assert "an endpoint" in eenv_text, eenv_text


@pytest.mark.timeout(60)
def test_a_serve_files_key_that_is_not_one(
    script_exe: Path,
    tmp_path: Path,
    eenv_text: str,
) -> None:
    """(the rendezvous given by mt_set_rendezvous, the stream by mt_set_endpoints)"""
    write_serving(tmp_path, 0, 1, "tcp://127.0.0.1:9", field_specs({"u": ((4,), "float32")}),
                  None, "x" * 39)  # fmt: skip
    start = START.replace("start\n", f"rendezvous {tmp_path} 5\nstart\n")
    got = run_script(script_exe, start + ASK, tmp_path)
    assert got[8][0] == MT_EENV and "curve_public_key of the serve file" in got[8][1], got
    assert "a CURVE key" in eenv_text, eenv_text


@pytest.mark.timeout(60)
def test_a_missing_variable(
    script_exe: Path,
    tmp_path: Path,
    eenv_text: str,
) -> None:
    got = run_script(script_exe, "field u 1 1 4\nstart\nabort\n", tmp_path)
    assert got[2][0] == MT_EENV and "MELISSA_TRAINER_SIMULATION_ID" in got[2][1], got
    assert "a MELISSA_TRAINER_* variable" in eenv_text, eenv_text
    assert "environment variable missing or malformed" not in eenv_text  # (all it said)
