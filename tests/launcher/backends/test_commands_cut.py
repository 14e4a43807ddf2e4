"""A command the launcher tells the user to run stays whole on one console line, and
one line of a job's log (`log_lines.cut`, `_COMMAND`: as `launcher_line`'s ``whole``
keeps a start's command whole on a line of its own).

Found by review hrev11 (of 3914d6af..00d3489d): the Slurm queue WARNINGs cut at 100
columns (hlines2, 40dba8a0, `queued_end._warn` -> `log_lines.cut`) cut the command they
tell the user to run between its words: ``...; scancel`` at the end of one line and
``  40829771 to give it up`` on the next (likewise ``scontrol release`` / ``resume``).
Copied from the console, the line ran ``scancel`` with no job. `cut` kept a number with
its unit (``5 s``), not a command with its job id.

The oracle: the commands as the text holds them once the cut is undone
(`launcher_said.one_line`, `said_in_log`), looked for on one line. Job names of 4 to 43
characters (a study's job names grow with its index and its restarts: ``sim-1234-r2``),
job ids of 7 and 8 digits; every caller of `cut`.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from pathlib import Path

import pytest
from launcher_said import COLUMNS, MORE, one_line, said_in_log
from test_slurm_warnings_fit import ANSWERS, LOGGER, SOON

from melissa_trainer.launcher.backends.base import CLOSE_REASON, Job, kill_line
from melissa_trainer.launcher.backends.slurm.handle import SlurmHandle
from melissa_trainer.launcher.backends.slurm.queued_end import queue_words, queued_end
from melissa_trainer.launcher.backends.slurm.step_end import (
    allocation_ended,
    node_failure,
    said_end,
)
from melissa_trainer.launcher.log_lines import cut

JOB_ID = "40829771"
COMMAND = re.compile(rf"(?:scancel|scontrol \w+) {JOB_ID}")


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _said(caplog: pytest.LogCaptureFixture, name: str, case: str) -> str:
    caplog.clear()
    handle = SlurmHandle(job=Job(name, ()), job_id=JOB_ID, exit_stem="")
    for state, reason in ANSWERS[case][0]:
        queue_words(handle, f"{name} (Slurm job {JOB_ID})", state, reason, SOON)
        handle.state, handle.reason = state, reason
        handle.ran = handle.ran or state == "RUNNING"
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1, said
    return said[0]


@pytest.mark.timeout(30)
def test_a_queue_warnings_commands_stay_on_one_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger=LOGGER)
    split: list[str] = []
    seen = 0
    for case in ANSWERS:
        for length in range(40):
            said = _said(caplog, "sim-" + "x" * length, case)
            commands = COMMAND.findall(one_line(said))
            seen += len(commands)  # ("requeued" names none: it runs again by itself)
            lines = said.split("\n")
            cut = [c for c in commands if not any(c in line for line in lines)]
            split += [f"{case}, {length}: {c!r}" for c in cut]
    assert seen >= 5 * 40, seen
    assert split == [], split


#: the commands the launcher's cut texts tell a user to run (read off their words):
#: none may be cut between its words, on the console or in a job's log
NAMED = re.compile(
    r"(?:scancel|scontrol \w+) \d+|sinfo -R|sbatch --no-requeue|scontrol show partition"
    r"|sbatch -k"
)
NODE = "gpu-a100-rack17-node0423.cluster.example.org"
#: what ends a job that ran, or one seen queued (`queued_end`'s cases)
FINALS = [(True, "TIMEOUT"), (True, "PREEMPTED"), (True, "NODE_FAIL"), (True, "CANCELLED"),
          (False, "CANCELLED")]  # fmt: skip
#: what srun writes in a step's log as Slurm ends it (`said_end`, `node_failure`)
STEP_LOGS = [
    "slurmstepd: error: *** STEP {id}.3 ON n1 CANCELLED AT 2026-12-07T07:19:25 DUE TO TIME "
    "LIMIT ***",
    "slurmstepd: error: *** STEP {id}.3 ON n1 CANCELLED AT 2026-12-07T07:19:25 ***",
    "slurmstepd: error: *** STEP {id}.3 ON n1 CANCELLED AT 2026-12-07T07:19:25 DUE TO "
    "PREEMPTION ***",
    "srun: Job step aborted: Waiting up to 4 seconds for job step to finish.",
    f"srun: error: Node failure on {NODE}",
]


def _cut_apart(text: str, lines: list[str]) -> list[str]:
    """The commands `text` names (`NAMED`) that no one of `lines` holds whole."""
    return [c for c in NAMED.findall(text) if not any(c in line for line in lines)]


def _check(said: str, lines: list[str], where: str, problems: list[str]) -> None:
    problems += [f"{where}: {c!r} cut" for c in _cut_apart(said, lines)]
    problems += [f"{where}: {len(li)} columns: {li!r}" for li in lines if len(li) > COLUMNS]


@pytest.mark.timeout(60)
def test_every_cut_text_keeps_its_commands_whole_within_100_columns(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """Each caller of `log_lines.cut` (the queue WARNINGs above; a job Slurm ended,
    batch or step, its node lost, its allocation ended: WARNING and job log; a kill's
    line; a start's line, its command apart), over job names of 4 to 43 characters and
    job ids of 7 and 8 digits: every line within 100 columns (the start's command on
    its own line aside: it is never cut), every command named whole on one line."""
    caplog.set_level("WARNING", logger=LOGGER)
    problems: list[str] = []
    seen = 0
    for length in range(40):
        name = "sim-" + "x" * length
        for job_id in ("4082977", "40829771"):
            log = tmp_path / f"{name}-{job_id}.log"
            job = Job(name, ("solver",), log_path=log)
            runs: list[partial[object]] = []
            for ran, final in FINALS:
                handle = SlurmHandle(job=job, job_id=job_id, exit_stem="", ran=ran, final=final)
                for limit in ("1-00:00:00", None):
                    runs.append(partial(queued_end, handle, f"{name} (Slurm job {job_id})", limit))
            step = f"{name} (pid 4123456) (srun step {name}-s)"
            for words in STEP_LOGS:
                runs.append(partial(_step_end, job, step, words.format(id=job_id)))
            runs.append(partial(_expired, job, job_id))
            kill = "scancel: SIGTERM, SIGKILL after 5 s"
            runs.append(partial(kill_line, job, CLOSE_REASON, kill))
            for run in runs:
                caplog.clear()
                log.write_text("")
                said = run()  # (one line, but `allocation_ended`'s: the study's error)
                cut = [said] if run.func is _expired and isinstance(said, str) else []
                for message in _warnings(caplog) + cut:
                    seen += len(NAMED.findall(one_line(message)))
                    _check(one_line(message), message.split("\n"), name, problems)
                for text in said_in_log(log.read_text()):
                    seen += len(NAMED.findall(text))
                    _check(text, log.read_text().splitlines(), f"{name} log", problems)
            log.write_text("")
            job.say_start("simulation 12 attempt 3", "slurm")
            written = log.read_text().splitlines()
            _check(written[0], written[:-1], f"{name} start", problems)
            assert written[-1] == MORE + "solver", written  # (the command, whole, apart)
    assert seen >= 40 * 2 * 10, seen
    assert problems == [], problems[:20]


def _step_end(job: Job, description: str, words: str) -> str | None:
    """`node_failure` or `said_end` (as `SrunSteps.poll` asks them) on a log of `words`."""
    Path(str(job.log_path)).write_text(f"some output\n{words}\n")
    return node_failure(job, description, 0) or said_end(job, description, 0, "30:00")


def _expired(job: Job, job_id: str) -> str | None:
    Path(str(job.log_path)).write_text(f"srun: error: Slurm job {job_id} has expired\n")
    return allocation_ended(job, 0, job_id)


@pytest.mark.timeout(30)
def test_a_quoted_command_stays_whole_at_every_offset() -> None:
    """A command quoted in backticks (``cut``'s other kept span), and an option's value
    after a Slurm command, at every place of a line: whole on one line, and the text
    given back (read as one line) as it was."""
    quoted = "`accelerate launch --max_restarts 3 train.py --resume_from_checkpoint latest`"
    for pad in range(1, COLUMNS):
        text = "x" * pad + f" then run {quoted} or scancel --signal=KILL 4082977_3 to end it"
        lines = cut(text)
        assert one_line("\n".join(lines)) == text, lines
        assert any(quoted in line for line in lines), lines
        assert any("scancel --signal=KILL 4082977_3" in line for line in lines), lines
        assert all(len(line) <= COLUMNS for line in lines), lines


@pytest.mark.timeout(30)
def test_an_option_stays_with_its_value_at_every_offset() -> None:
    """An option with its value (``--resume_from_checkpoint latest``, ``-n 2``) after
    any command, not only a Slurm one's, at every place of a line: on one line, and the
    text given back as it was. Failed before: `cut` kept a pair whole only after a Slurm
    command (``scancel --signal=KILL``, ``sbatch --time 5``), and cut ``mpiexec -n`` from
    ``2`` or ``--resume_from_checkpoint`` from ``latest`` where the line ended."""
    pairs = ["--resume_from_checkpoint latest", "-n 2", "--nproc_per_node 4", "--time 5"]
    cuts: list[str] = []
    for pad in range(1, COLUMNS):
        text = (
            "x" * pad + f" run the trainer again with {pairs[0]}, or mpiexec {pairs[1]} "
            f"python solver.py, or torchrun {pairs[2]} train.py {pairs[3]} (in minutes)"
        )
        lines = cut(text)
        assert one_line("\n".join(lines)) == text, lines
        assert all(len(line) <= COLUMNS for line in lines), lines
        cuts += [f"{pad}: {p!r}" for p in pairs if not any(p in line for line in lines)]
    assert cuts == [], cuts[:10]
