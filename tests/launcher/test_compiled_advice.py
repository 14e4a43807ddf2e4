"""The start-up advice for a compiled solver (the C client; the Fortran bindings call
it): worker mode is the Python client's (``next_simulation()``), so a C solver whose
start-up dominates must not be told to use it. Seen before: a C solver that slept 3 s
before its first message was told "Worker mode pays it once per job:
Launcher(..., worker=True), the solver looping on ...next_simulation()", which it cannot
do. The launcher knows the solver's kind from its HELLO (``"client": "c"``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
from compiled import CClient, c_client  # noqa: F401 (a fixture)
from own_solver import run_to_end, startup_advice, study

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

#: a C solver whose start-up (a 3 s sleep standing in for MPI_Init, a mesh read) is most
#: of its wall time: then 3 steps of a 4-float field at once
C_SOLVER = r"""
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>
#include "melissa_trainer.h"

int main(void) {
    struct timespec startup = {3, 0};
    nanosleep(&startup, NULL);
    mt_client *c;
    uint64_t four = 4;
    double x = 0;
    if (mt_client_create(&c) != MT_OK) return 1;
    mt_declare_field(c, "u", MT_FLOAT32, 1, &four);
    if (mt_client_start(c) != MT_OK) { fprintf(stderr, "%s\n", mt_client_error(c)); return 2; }
    mt_client_parameter(c, "x", &x);
    for (uint64_t t = 0; t < 3; ++t) {
        float u[4] = {(float)x, (float)t, 0, 0};
        if (mt_send(c, t, "u", MT_FLOAT32, u, 4) != MT_OK) return 3;
    }
    return mt_client_close(c) == MT_OK ? 0 : 4;
}
"""


@pytest.mark.timeout(300)
def test_a_c_solver_whose_start_up_dominates_is_not_told_to_use_worker_mode(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    (tmp_path / "solver.c").write_text(C_SOLVER)
    exe = c_client.compile(tmp_path / "solver.c", tmp_path / "solver")
    launch, receiver, buffer = study(tmp_path, [str(exe)], 2, {"x": (0, 1)}, job_limit=2)
    assert run_to_end(launch, receiver, buffer) == 6
    told = startup_advice(caplog)
    assert len(told) == 1, told  # the start-up is measured and said, once
    assert "before its first message" in told[0]
    # not worker mode, which a C solver cannot use, but what helps one
    assert "worker=True" not in told[0] and "next_simulation() (see" not in told[0], told[0]
    assert "C and Fortran clients have no worker mode" in told[0], told[0]
    assert "compiled-solver.md" in told[0], told[0]
