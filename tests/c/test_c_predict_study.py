"""C and Fortran simulations ask a real trainer for predictions while it trains (issue
47): a study whose simulations are compiled programs (even ids C, `mt_predict`; odd ids
Fortran, the module's `mt_predict`) that stream samples and, every few steps, ask the
`ServingHook`'s current model for its prediction, falling back on a refusal
(``not_serving`` before training starts) as a simulation would.

Oracle, independent of the serving path (as tests/trainer/test_serving_study.py): a hook
records the model's weights at every version; each answer must be the linear model of
the version it names applied to the inputs the simulation sent.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from compiled import CClient, compile_fortran_program
from serving_parts import Weights, linear, serving_hook, serving_study

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(sys.platform != "linux", reason="the local backend uses /proc"),
    pytest.mark.e2e,
]

SIMULATIONS, STEPS, ASK_EVERY = 2, 40, 10

C_SIMULATION = r"""
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "melissa_trainer.h"

int main(void) {
    mt_client *c;
    uint64_t three = 3, one = 1;
    double a = 0, b = 0;
    if (mt_client_create(&c) != MT_OK) return 1;
    mt_declare_field(c, "x", MT_FLOAT32, 1, &three);
    mt_declare_field(c, "y", MT_FLOAT32, 1, &one);
    if (mt_client_start(c) != MT_OK) { fprintf(stderr, "%s\n", mt_client_error(c)); return 2; }
    mt_client_parameter(c, "a", &a);
    mt_client_parameter(c, "b", &b);
    char path[4096];
    snprintf(path, sizeof path, "%s/sim%llu.txt", getenv("OUT"),
             (unsigned long long)mt_client_simulation_id(c));
    FILE *out = fopen(path, "w");
    if (out == NULL) return 3;
    for (uint64_t t = 0; t < STEPS; ++t) {
        float x[3] = {(float)a, (float)b, (float)t / 100.0f}, y[1] = {x[0] + x[1] + x[2]};
        mt_send(c, t, "x", MT_FLOAT32, x, 3);
        mt_send(c, t, "y", MT_FLOAT32, y, 1);
        if (t % ASK_EVERY != ASK_EVERY - 1) continue;
        mt_flush(c); /* (the trainer waits for these to train) */
        for (int attempt = 0; attempt < 400; ++attempt) {
            float guess[1] = {0};
            uint64_t version = 0;
            mt_input in = {"x", x, &three, MT_FLOAT32, 1};
            mt_output o = {"y", guess, 1, MT_FLOAT32, 0, {0}, 0};
            mt_status st = mt_predict(c, &in, 1, &o, 1, 30.0, &version);
            if (st == MT_EREFUSED) { /* before training starts: not_serving */
                fprintf(out, "refused %d\n", (int)mt_predict_refusal(c, NULL));
                struct timespec pause = {0, 50000000};
                nanosleep(&pause, NULL);
                continue;
            }
            if (st != MT_OK) { fprintf(stderr, "%s\n", mt_client_error(c)); return 4; }
            fprintf(out, "answer %.9g %.9g %.9g %.9g %llu\n", x[0], x[1], x[2], guess[0],
                    (unsigned long long)version);
            break;
        }
    }
    fclose(out);
    return mt_client_close(c) == MT_OK ? 0 : 5;
}
""".replace("ASK_EVERY", str(ASK_EVERY)).replace("STEPS", str(STEPS))

FORTRAN_SIMULATION = r"""
program simulation
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  interface
    function usleep(us) bind(C, name='usleep') result(r)
      import :: c_int
      integer(c_int), value :: us
      integer(c_int) :: r
    end function
  end interface
  type(mt_client_t) :: client
  real(c_float) :: x(3), y(1), guess(1)
  real(c_double) :: a, b, retry
  integer(c_int64_t) :: version
  integer :: t, attempt, ierr, unit
  character(len=4096) :: out
  character(len=32) :: id
  call mt_create(client)
  call mt_declare_field(client, 'x', MT_FLOAT32, shape(x))
  call mt_declare_field(client, 'y', MT_FLOAT32, shape(y))
  call mt_start(client)
  call mt_parameter(client, 'a', a)
  call mt_parameter(client, 'b', b)
  call get_environment_variable('OUT', out)
  write (id, '(i0)') mt_simulation_id(client)
  open (newunit=unit, file=trim(out) // '/sim' // trim(id) // '.txt', action='write')
  do t = 0, STEPS - 1
    x = [real(a, c_float), real(b, c_float), real(t, c_float) / 100.0_c_float]
    y = sum(x)
    call mt_send(client, t, 'x', x)
    call mt_send(client, t, 'y', y)
    if (mod(t, ASK_EVERY) /= ASK_EVERY - 1) cycle
    call mt_flush(client)
    do attempt = 1, 400
      call mt_predict(client, 'x', x, 'y', guess, version, 30.0_c_double, ierr)
      if (ierr == MT_EREFUSED) then
        write (unit, '(a, 1x, i0)') 'refused', mt_predict_refusal(client, retry)
        if (usleep(50000_c_int) /= 0) continue
        cycle
      end if
      if (ierr /= MT_OK) then
        print '(a)', mt_error_message(client)
        error stop 4
      end if
      write (unit, '(a, 4(1x, es17.9e3), 1x, i0)') 'answer', x, guess, version
      exit
    end do
  end do
  close (unit)
  call mt_close(client)
end program
""".replace("ASK_EVERY", str(ASK_EVERY)).replace("STEPS", str(STEPS))


def simulations(client: CClient, tmp_path: Path) -> tuple[Path, bool]:
    """A launcher command: the C simulation for even ids, the Fortran one for odd ids
    (the C one for both, and False, where the Fortran module was not built)."""
    (tmp_path / "sim.c").write_text(C_SIMULATION)
    c_sim = client.compile(tmp_path / "sim.c", tmp_path / "sim_c")
    f_sim, fortran = c_sim, False
    modules = client.prefix / "include" / "fortran"
    if shutil.which("gfortran") and (modules / "melissa_trainer_predict.mod").exists():
        f_sim = compile_fortran_program(client, FORTRAN_SIMULATION, tmp_path, "sim_fortran")
        fortran = True
    wrapper = tmp_path / "sim.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'if [ $((MELISSA_TRAINER_SIMULATION_ID % 2)) -eq 0 ]; then exec "{c_sim}"; fi\n'
        f'exec "{f_sim}"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, fortran


@pytest.mark.timeout(240)
def test_c_and_fortran_simulations_get_the_model_of_the_version_they_are_told(
    c_client: CClient,
    tmp_path: Path,
) -> None:
    command, fortran = simulations(c_client, tmp_path)
    serving, weights = serving_hook(), Weights()
    trainer, launcher = serving_study(tmp_path, [str(command)], SIMULATIONS, [weights, serving])
    state = trainer.train()
    assert state.global_step == SIMULATIONS * STEPS  # every sample trained on once
    summary = launcher.summary()
    assert summary["failed"] == 0 and summary["restarts"] == 0, launcher.failures()

    versions_seen = []
    for sid in range(SIMULATIONS):
        answers, refusals = [], []
        for line in (tmp_path / f"sim{sid}.txt").read_text().splitlines():
            kind, *values = line.split()
            if kind == "refused":
                refusals.append(int(values[0]))
            else:
                *x, y, version = values
                answers.append((np.array(x, np.float32), np.float32(y), int(version)))
        assert len(answers) == STEPS // ASK_EVERY, (sid, answers)
        assert set(refusals) <= {2}  # not_serving, before training starts
        versions = [a[2] for a in answers]
        assert versions == sorted(versions)  # a simulation never sees an older model
        for x, y, version in answers:
            expected = linear(weights.by_version[version], x)
            np.testing.assert_allclose([y], expected, rtol=1e-5, atol=1e-6)
        versions_seen += versions
    assert max(versions_seen) > 0  # trained models were served, not only the initial one
    assert serving.telemetry()["answered"] == SIMULATIONS * (STEPS // ASK_EVERY)
    if not fortran:
        pytest.skip("the C simulations passed; the Fortran one needs gfortran and the module")
