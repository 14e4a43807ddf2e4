"""External mode across a trainer restart, with C and Fortran solvers: the C client (and
the Fortran module on it) follows a trainer SIGTERMed or SIGKILLed and resumed from its
checkpoint as the Python client does (clients/c/src/follow.c; the Python solver's version
is tests/checkpoint/test_external_resume.py, whose study and oracle these reuse).

What a user sees, asserted here:

* the running C solvers notice the resumed trainer in the rendezvous, ask it which of their
  steps its checkpoint holds (HELD), say HELLO again and send the others again from their
  replay window (64 MiB by default), and exit 0; every (simulation, time step) is trained
  on exactly once across both runs (before the change they exited non-zero, saying that the
  C client does not follow a restarted trainer);
* a window too small for what the checkpoint lacks (``MELISSA_TRAINER_REPLAY_BYTES``) fails
  the solver (non-zero exit) with an error naming the window's bound and the advice to run
  it again with the same simulation id; the moment is made exact, not timed (as
  tests/checkpoint/test_external_close.py): the trainer holds after checkpoint-2, so that
  the steps sent after it cannot be in the checkpoint the resumed trainer loads;
* a Fortran solver follows too.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from compiled import CClient, c_client, compile_fortran_program  # noqa: F401 (a fixture)
from test_external_close import assert_trained_once
from test_external_resume import (
    DRIVER,
    SIMULATIONS,
    STEPS,
    Study,
    assert_each_step_trained_on_once,
    preempt_while_solvers_stream,
)
from waiting import wait_until

pytestmark = [
    pytest.mark.slow,
    pytest.mark.e2e,
    pytest.mark.skipif(sys.platform != "linux", reason="process groups, SIGSTOP"),
]

# A C solver of the heat example's field (its values do not matter to the oracle): the
# study's parameters, SOLVER_STEP_SLEEP seconds before each step; with SOLVER_GATES=DIR,
# at step SOLVER_FIRST it touches DIR/sent and waits for DIR/go, at step SOLVER_MID
# DIR/mid and DIR/go2; with SOLVER_CLOSING set it touches DIR/closing as it closes.
# SOLVER_CLOSE_TIMEOUT: mt_set_close_timeout; SOLVER_SNDHWM: mt_set_sndhwm; with
# SOLVER_UNBATCHED set, no batching; with SOLVER_SAY set it prints "sending T" before
# each send. Exit 0 only if the close
# returned MT_OK.
C_SOLVER = r"""
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include "melissa_trainer.h"

static void nap(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

static void gate(const char *dir, const char *mark, const char *go) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, mark);
    FILE *f = fopen(path, "w");
    if (f != NULL) fclose(f);
    snprintf(path, sizeof path, "%s/%s", dir, go);
    while (access(path, F_OK) != 0) nap(0.01);
}

int main(int argc, char **argv) {
    long steps = argc > 1 ? atol(argv[1]) : 40;
    const char *sleep_s = getenv("SOLVER_STEP_SLEEP"), *gates = getenv("SOLVER_GATES");
    long first = getenv("SOLVER_FIRST") ? atol(getenv("SOLVER_FIRST")) : -1;
    long mid = getenv("SOLVER_MID") ? atol(getenv("SOLVER_MID")) : -1;
    static const char *names[] = {"t_initial", "t_left", "t_right", "t_bottom", "t_top"};
    static const double values[] = {300, 200, 400, 300, 250};
    mt_client *c = NULL;
    uint64_t shape[2] = {6, 6};
    mt_status st = mt_client_create(&c);
    for (int k = 0; k < 5 && st == MT_OK; ++k) st = mt_set_parameter(c, names[k], values[k]);
    if (st == MT_OK) st = mt_set_disconnected_timeout(c, 2.0);
    if (st == MT_OK && getenv("SOLVER_CLOSE_TIMEOUT"))
        st = mt_set_close_timeout(c, atof(getenv("SOLVER_CLOSE_TIMEOUT")));
    if (st == MT_OK && getenv("SOLVER_SNDHWM"))
        st = mt_set_sndhwm(c, atoi(getenv("SOLVER_SNDHWM")));
    if (st == MT_OK && getenv("SOLVER_UNBATCHED")) st = mt_set_batching(c, 0, 0.02);
    if (st == MT_OK) st = mt_declare_field(c, "temperature", MT_FLOAT32, 2, shape);
    if (st == MT_OK) st = mt_client_start(c);
    float u[36];
    for (long t = 0; t < steps && st == MT_OK; ++t) {
        if (gates != NULL && t == first) gate(gates, "sent", "go");
        if (gates != NULL && t == mid) gate(gates, "mid", "go2");
        if (sleep_s != NULL) nap(atof(sleep_s));
        for (int i = 0; i < 36; ++i) u[i] = (float)(300.0 + t + 0.01 * i);
        if (getenv("SOLVER_SAY") != NULL) {
            printf("sending %ld\n", t);
            fflush(stdout);
        }
        st = mt_send(c, (uint64_t)t, "temperature", MT_FLOAT32, u, 36);
    }
    if (st != MT_OK) {
        fprintf(stderr, "send failed: %d %s\n", (int)st, mt_client_error(c));
        mt_client_abort(c);
        return 1;
    }
    if (gates != NULL && getenv("SOLVER_CLOSING")) gate(gates, "closing", "."); /* (no wait) */
    st = mt_client_close(c); /* (its error, if any, on stderr) */
    printf("closed %d\n", (int)st);
    return st == MT_OK ? 0 : 1;
}
"""

FORTRAN_SOLVER = """
program follower
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  interface
    function usleep(us) bind(C, name="usleep") result(rc)
      import :: c_int
      integer(c_int), value :: us
      integer(c_int) :: rc
    end function
  end interface
  type(mt_client_t) :: client
  real(c_float) :: u(6, 6)
  integer :: t, ierr
  integer(c_int) :: rc
  call mt_create(client)
  call mt_set_parameter(client, 't_initial', 300.0_c_double)
  call mt_set_parameter(client, 't_left', 200.0_c_double)
  call mt_set_parameter(client, 't_right', 400.0_c_double)
  call mt_set_parameter(client, 't_bottom', 300.0_c_double)
  call mt_set_parameter(client, 't_top', 250.0_c_double)
  call mt_declare_field(client, 'temperature', MT_FLOAT32, [6, 6])
  call mt_start(client)
  do t = 0, %(steps)d - 1
    rc = usleep(200000_c_int)
    u = real(300 + t, c_float)
    call mt_send(client, t, 'temperature', u)
  end do
  call mt_close(client, ierr)
  print '(a, i0)', 'closed ', ierr
  if (ierr /= 0) error stop 1
end program follower
"""


class CStudy(Study):
    """The study, its solvers a compiled program (`exe`) reading the rendezvous from
    MELISSA_TRAINER_RENDEZVOUS."""

    def __init__(self, tmp: Path, exe: Path, steps: int = STEPS) -> None:
        super().__init__(tmp)
        self.exe, self.time_steps = exe, steps

    def solver(self, simulation: int, name: str, **env: str) -> subprocess.Popen[str]:
        env = {**self.env, "MELISSA_TRAINER_SIMULATION_ID": str(simulation),
               "MELISSA_TRAINER_RENDEZVOUS": str(self.rendezvous), **env}  # fmt: skip
        with open(self.tmp / f"{name}-{simulation}.out", "w") as log:
            proc = subprocess.Popen(
                [str(self.exe), str(self.time_steps)], cwd=self.tmp, env=env, stdout=log,
                stderr=subprocess.STDOUT, text=True, start_new_session=True,
            )  # fmt: skip
        self.procs.append(proc)
        return proc


def c_solver(client: CClient, tmp: Path) -> Path:
    source = tmp / "solver.c"
    source.write_text(C_SOLVER)
    return client.compile(source, tmp / "solver")


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
@pytest.mark.timeout(600)
def test_running_c_solvers_follow_a_resumed_trainer(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
    stop: signal.Signals,
) -> None:
    study = CStudy(tmp_path, c_solver(c_client, tmp_path))
    try:
        solvers, new_run = preempt_while_solvers_stream(study, stop)  # type: ignore[arg-type]
        codes = [s.wait(120) for s in solvers]
        said = [study.output(f"solver-{i}") for i in range(SIMULATIONS)]
        assert codes == [0] * SIMULATIONS, [s[-1500:] for s in said]
        for text in said:
            assert f"followed the restarted trainer (run {new_run} at tcp://" in text, text
            assert "closed 0" in text, text
        resumed = study.procs[SIMULATIONS + 1]
        assert resumed.wait(300) == 0, study.output("resumed")[-3000:]
        assert_each_step_trained_on_once(study)
    finally:
        study.cleanup()


# -- a window too small: the moment made exact ------------------------------------------

HELD_STEPS, FIRST, MID = 48, 8, 40  # (48: test_external_close's, whose oracle is used)
HELD_FLAGS = [
    "--external", "--num_simulations", "1", "--time_steps", str(HELD_STEPS),
    "--grid_size", "6", "--num_validation", "1", "--hidden", "16", "--no_plot",
    "--buffer", "fifo", "--buffer_size", "8", "--watermark", "1",
    "--sample_to_insert_ratio", "none", "--batch_size", "4", "--save_steps", "2",
    "--logging_steps", "5", "--eval_steps", "none", "--disable_progress_bar",
    "--stop_sync_steps", "1", "--json",
]  # fmt: skip


@dataclass
class Held:
    """A study whose first trainer holds after checkpoint-2 (its buffer full, then its
    queues: it trains nothing more) while its solver, past its first steps, goes on."""

    study: CStudy
    first: subprocess.Popen[str]
    solver: subprocess.Popen[str]
    gates: Path
    hold: Path
    args: list[str]
    old_run: str | None


def start_held(study: CStudy, tmp_path: Path, **solver_env: str) -> Held:
    """Start `study`'s trainer (it holds after checkpoint-2) and its solver 0 (with
    `solver_env` and the gates); return once the trainer holds and the solver's first
    gate is open. The caller cleans `study` up."""
    gates, hold = tmp_path / "gates", tmp_path / "hold"
    gates.mkdir()
    args = [str(DRIVER), *HELD_FLAGS, "--output_dir", str(study.out)]
    env = {**study.env, "LINEAGE_LOG": str(tmp_path / "first.lineage"),
           "LINEAGE_HOLD": str(hold), "LINEAGE_HOLD_SECONDS": "600"}  # fmt: skip
    first = study._start("first", args, env)
    wait_until(lambda: study.run_id() is not None, "the trainer's rendezvous", 180.0)
    old_run = study.run_id()
    solver = study.solver(0, "solver", SOLVER_GATES=str(gates), SOLVER_FIRST=str(FIRST),
                          **solver_env)  # fmt: skip
    wait_until(lambda: (gates / "sent").exists(), "the solver's first steps", 180.0)
    wait_until(lambda: "checkpoint-2" in study.checkpoints(), "checkpoint-2", 180.0)
    hold.touch()  # (the trainer trains nothing more: its buffer fills, then its queues)
    (gates / "go").touch()
    return Held(study, first, solver, gates, hold, args, old_run)


@pytest.mark.timeout(600)
def test_a_window_too_small_for_what_the_checkpoint_lacks_fails_the_c_solver(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    # The trainer trains 2 steps (8 samples), writes checkpoint-2 and holds; the solver
    # sends up to step MID (into the trainer's full buffer and queues: none of them in
    # checkpoint-2), the trainer is killed and resumed from checkpoint-2, and the solver,
    # continued, needs steps 16.. again: its window holds one step (152 bytes a step).
    study = CStudy(tmp_path, c_solver(c_client, tmp_path), HELD_STEPS)
    try:
        held = start_held(study, tmp_path, SOLVER_MID=str(MID),
                          MELISSA_TRAINER_REPLAY_BYTES="300")  # fmt: skip
        first, solver, gates, hold, args, old_run = (
            held.first, held.solver, held.gates, held.hold, held.args, held.old_run)  # fmt: skip
        wait_until(lambda: (gates / "mid").exists(), "the solver at step MID", 180.0)
        first.send_signal(signal.SIGKILL)
        assert first.wait(60) == -signal.SIGKILL
        hold.unlink()
        env = {**study.env, "LINEAGE_LOG": str(tmp_path / "resumed.lineage")}
        study._start("resumed", [*args, "--resume_from_checkpoint", "latest"], env)
        wait_until(lambda: study.run_id() not in (None, old_run), "the resumed trainer", 180.0)
        (gates / "go2").touch()
        code = solver.wait(120)
        said = study.output("solver-0")
    finally:
        study.cleanup()
    assert code != 0, said
    assert (
        "simulation 0 rank 0: the restarted trainer's checkpoint lacks" in said
        and "that have left its replay window (mt_set_replay_bytes=300 bytes, or "
        "MELISSA_TRAINER_REPLAY_BYTES: make it hold what the simulation sends between two "
        "checkpoints). Run this simulation again, with the same simulation id "
        "(MELISSA_TRAINER_SIMULATION_ID=0)"
        in said
    ), said


# -- Fortran ----------------------------------------------------------------------------


@pytest.mark.timeout(600)
def test_running_fortran_solvers_follow_a_resumed_trainer(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    exe = compile_fortran_program(
        c_client, FORTRAN_SOLVER % {"steps": STEPS}, tmp_path, "follower"
    )  # fmt: skip
    study = CStudy(tmp_path, exe)
    try:
        solvers, new_run = preempt_while_solvers_stream(study, signal.SIGKILL)  # type: ignore[arg-type]
        codes = [s.wait(120) for s in solvers]
        said = [study.output(f"solver-{i}") for i in range(SIMULATIONS)]
        assert codes == [0] * SIMULATIONS, [s[-1500:] for s in said]
        for text in said:
            assert f"followed the restarted trainer (run {new_run} at tcp://" in text, text
        resumed = study.procs[SIMULATIONS + 1]
        assert resumed.wait(300) == 0, study.output("resumed")[-3000:]
        assert_each_step_trained_on_once(study)
    finally:
        study.cleanup()


@pytest.mark.timeout(600)
def test_a_trainer_killed_as_the_c_solver_closes_is_followed_by_the_close(
    c_client: CClient,  # noqa: F811
    tmp_path: Path,
) -> None:
    """test_external_close.py with a C solver: the trainer holds after checkpoint-2 (its
    buffer full, its receiver not reading), the solver sends its other steps and closes,
    the trainer is killed then (SIGKILL) and resumed. Whether the BYE was still queued
    (not delivered within the close timeout, 15 s here) or had reached the dead trainer
    (its follow socket then silent for the disconnected timeout), the close follows the
    resumed trainer, sends again what checkpoint-2 lacks, says BYE again and returns
    MT_OK once the new receiver has it: every step trained on once. Before: MT_ETIMEDOUT,
    the last steps lost."""
    study = CStudy(tmp_path, c_solver(c_client, tmp_path), HELD_STEPS)
    try:
        held = start_held(study, tmp_path, SOLVER_CLOSING="1", SOLVER_CLOSE_TIMEOUT="15")
        first, solver, gates, hold, args, old_run = (
            held.first, held.solver, held.gates, held.hold, held.args, held.old_run)  # fmt: skip
        wait_until(lambda: (gates / "closing").exists(), "the solver's close", 180.0)
        first.send_signal(signal.SIGKILL)
        assert first.wait(60) == -signal.SIGKILL
        hold.unlink()
        env = {**study.env, "LINEAGE_LOG": str(tmp_path / "resumed.lineage")}
        resumed = study._start("resumed", [*args, "--resume_from_checkpoint", "latest"], env)
        wait_until(lambda: study.run_id() not in (None, old_run), "the resumed trainer", 180.0)
        code = solver.wait(300)
        said = study.output("solver-0")
        assert code == 0, said[-3000:]
        assert "followed the restarted trainer" in said, said[-3000:]
        assert resumed.wait(300) == 0, study.output("resumed")[-3000:]
        assert_trained_once(study)
    finally:
        study.cleanup()
