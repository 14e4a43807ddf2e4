"""A job's log says, in lines of the launcher's own (`log_lines.LAUNCHER`), when and how
the launcher started the job and that it killed it, and why; a failure report's quote of
the log's last lines leaves them out (they are not the solver's output). Before, a
user reading a hung solver's log could not tell that the launcher had killed it, nor
when it had started it. Real processes: a hung solver killed by the launcher's silence
watch (`LocalBackend`), and an ``mpiexec`` job killed by `MpiexecBackend.kill`."""

from __future__ import annotations

import re
import shlex
import sys
import time
from pathlib import Path

import pytest
from helpers import NO_MPI, find_mpiexec
from launcher_runs import failure, launcher, script
from launcher_said import MORE, PREFIX, said_in_log, too_long

from melissa_trainer.launcher.backends import Job, MpiexecBackend
from melissa_trainer.launcher.log_lines import slurm_log
from melissa_trainer.launcher.reports import log_tail
from melissa_trainer.launcher.systematic import last_log_line

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and PDEATHSIG")

#: prints a line, then hangs, silent, until killed
HUNG = """
import time
print("step 0 sent", flush=True)
time.sleep(600)
"""


@pytest.mark.e2e
@pytest.mark.timeout(60)
def test_a_hung_jobs_log_says_its_start_and_its_kill_and_the_report_quotes_the_solver(
    tmp_path: Path,
) -> None:
    """Failed before: the log held the solver's line only (no start, no kill). With the
    lines but without `tail_lines` leaving them out, the report quoted the kill line as
    the solver's last line. Then the kill's line, 518 characters long (the silence
    rule), failed its short form; then, one line of ~230 characters, its 100 columns."""
    sim = [sys.executable, script(tmp_path, HUNG)]
    tuning: dict[str, object] = {
        "simulation_timeout": 1.0,
        "max_restarts": 0,
        "on_failure": "raise",
    }
    tuning["systematic_failures"] = None
    launch = launcher(sim, 1, tuning=tuning, job_limit=1, log_dir=tmp_path / "logs")
    launch.start(tmp_path / "rendezvous")
    try:
        report = str(failure(launch))
    finally:
        launch.stop()
    log = tmp_path / "logs" / "sim-0.log"
    text = log.read_text()
    lines = text.splitlines()
    # the start line, cut at spaces (before, one line of ~220 characters) but for the
    # command, whole on a line of its own: copied after the prefix, it pastes as it ran
    solver = lines.index("step 0 sent")
    assert lines[0].startswith(PREFIX + "20"), lines
    assert all(line.startswith(MORE) for line in lines[1:solver]), lines
    assert lines[solver - 1] == MORE + shlex.join(sim), lines
    start, kill = said_in_log(text)
    assert start.split(": ", 1)[1] == (
        "starting sim-0 (attempt 0, local, 1 rank): " + shlex.join(sim)
    ), start
    # the kill's line, cut at spaces into lines of at most 100 columns, each after the
    # first starting with the prefix and two spaces (failed before: one line of ~230)
    assert lines[solver + 1].startswith(PREFIX + "20") and solver + 2 < len(lines), lines
    assert all(line.startswith(MORE) for line in lines[solver + 2 :]), lines
    assert too_long(text) == ([lines[solver - 1]] if len(lines[solver - 1]) > 100 else [])
    assert "killing this job (SIGTERM to its process group, SIGKILL after 2 s): hung: " in kill
    # short (what, how long silent, the bound, the setting): before, 518 characters, the
    # silence rule and the parameters, which the WARNING says
    said = kill.split("): ", 1)[1]
    assert re.fullmatch(
        r"hung: simulation 0 silent \d+\.\d s before its first message \(bound 1\.0 s; "
        r"LauncherTuning\(startup_timeout=\.\.\.\) to wait longer\)",
        said,
    ), kill
    assert "    | step 0 sent" in report, report
    assert PREFIX not in report, report
    assert last_log_line(log) == "step 0 sent"


def test_the_quoted_lines_leave_the_launchers_out(tmp_path: Path) -> None:
    """A solver's last line cut by the kill (no newline) stays its own line, and the
    launcher's lines are not quoted; a log of launcher lines only quotes nothing."""
    from melissa_trainer.launcher.log_lines import launcher_line

    log = tmp_path / "logs" / "sim-0.log"
    launcher_line(log, "starting simulation 0 attempt 0")  # (its folder made)
    with open(log, "a") as f:
        f.write("step 0 sent\nstep 1 se")  # (a print cut short)
    launcher_line(log, "killing this job: hung")
    assert log.read_text().splitlines()[2] == "step 1 se"
    assert log.read_text().splitlines()[3].startswith(PREFIX + "20")
    assert log_tail(log) == "    | step 0 sent\n    | step 1 se"
    assert last_log_line(log) == "step 1 se"
    only = tmp_path / "sim-1.log"
    launcher_line(only, "starting simulation 1 attempt 0")
    launcher_line(only, "killing this job: the study stops")
    assert log_tail(only) == "    (empty log: nothing from the solver)"
    assert last_log_line(only) == ""


def test_a_launcher_line_with_a_newline_in_its_text_stays_one_line(tmp_path: Path) -> None:
    """A command whose argument holds a newline (``shlex.join`` keeps it) is still one
    launcher line: its second half is neither unprefixed nor quoted as the solver's."""
    from melissa_trainer.launcher.log_lines import launcher_line

    log = tmp_path / "sim-0.log"
    launcher_line(log, "starting simulation 0 attempt 0: " + shlex.join(["solver", "a\nb\r\nc"]))
    lines = log.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith(PREFIX), lines
    assert "a\\nb\\r\\nc" in lines[0], lines
    assert log_tail(log) == "    (empty log: nothing from the solver)"


def test_a_wrapped_launcher_line_keeps_its_words_and_a_long_word_whole(tmp_path: Path) -> None:
    """`launcher_line`: lines of at most 100 columns cut at spaces, the
    words in order, a word longer than a line whole on a line of its own; after a
    solver's line cut by the kill, on a new line; none quoted as the solver's."""
    from melissa_trainer.launcher.log_lines import launcher_line

    log = tmp_path / "sim-0.log"
    log.write_text("step 1 se")  # (a print cut short)
    words = [f"word{i}" for i in range(40)]
    path = "/scratch/" + "x" * 120 + "/solver.log"
    launcher_line(log, " ".join([*words[:20], path, *words[20:]]))
    lines = log.read_text().splitlines()
    assert lines[0] == "step 1 se"
    ours = lines[1:]
    assert ours[0].startswith(PREFIX + "20") and ours[0].split(": ", 1)[1].startswith("word0 ")
    assert all(line.startswith(PREFIX + "  ") for line in ours[1:]), ours
    assert [line for line in ours if len(line) > 100] == [PREFIX + "  " + path], ours
    said = [ours[0].split(": ", 1)[1], *(line.removeprefix(PREFIX + "  ") for line in ours[1:])]
    assert " ".join(said).split() == [*words[:20], path, *words[20:]]
    assert log_tail(log) == "    | step 1 se"
    # a number stays with its unit: "5" would end the first line (its 99th column)
    timed = tmp_path / "sim-1.log"
    launcher_line(timed, "x" * 48 + " 5 s) then more words")
    lines = timed.read_text().splitlines()
    assert lines[1] == PREFIX + "  5 s) then more words", lines


MPIEXEC = find_mpiexec()


@pytest.mark.e2e
@pytest.mark.skipif(MPIEXEC is None, reason=NO_MPI)
@pytest.mark.timeout(60)
def test_an_mpiexec_jobs_kill_line_comes_before_hydras_banner(tmp_path: Path) -> None:
    """`MpiexecBackend.kill` with a reason: its line in the log, before what hydra
    prints of the SIGTERM. Failed before: `kill` took no reason (a TypeError)."""
    assert MPIEXEC is not None
    log = tmp_path / "sim-0.log"
    code = "import pathlib, time; print('solver step 7', flush=True); "
    code += f"pathlib.Path({str(tmp_path)!r}, 'started').touch(); time.sleep(60)"
    backend = MpiexecBackend(MPIEXEC)
    handle = backend.launch(Job("sim-0", [sys.executable, "-c", code], log_path=log))
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists() or "step 7" not in log.read_text():
            assert time.monotonic() < deadline, "the rank did not start"
            time.sleep(0.02)
        assert backend.kill(handle, grace=10.0, reason="refused by the receiver: x") is None
    finally:
        backend.close()
    text = log.read_text()
    said = "killing this job (SIGTERM to its process group, SIGKILL after 10 s): refused by "
    ours = [line for line in text.splitlines() if line.startswith(PREFIX)]
    assert too_long(text) == [], ours  # (cut at spaces, `launcher_line`)
    (kill,) = said_in_log(text)
    assert said + "the receiver: x" in kill, text
    assert text.index(ours[0]) > text.index("solver step 7"), text
    if "Terminated (signal 15)" in text:  # (hydra's banner, after the kill's lines)
        assert text.index("Terminated (signal 15)") > text.index(ours[-1]), text
    assert log_tail(log).endswith("    | solver step 7"), log_tail(log)


@pytest.mark.timeout(30)
def test_a_start_sentence_is_one_line_and_names_its_backend(tmp_path: Path) -> None:
    """`Job.say_start`'s sentence is one line of at most 100 columns with the prefix and
    the time when its name, what it is, its backend and its ranks take at most 34
    characters together (``worker-12-r2``, ``launch 3``, ``slurm``, ``16 ranks``: 33;
    ``sim-12345-r9``, ``attempt 9``, ``local``, ``1 rank``: 32), the command on the next
    (failed before: a worker's first, ``starting worker 0 (its launch 1) as job
    worker-0 (local backend, 1 rank):``, took two lines); a longer one is cut, each
    line within 100 columns. `slurm_log` reads its backend, and the backend of a log
    whose start line was written before."""
    starts = [
        (f"worker-{slot}" + (f"-r{n - 1}" if n > 1 else ""), f"launch {n}")
        for slot in (0, 12, 99)
        for n in (1, 2, 9, 13)
    ]
    starts += [
        (f"sim-{sid}-r{a}" if a else f"sim-{sid}", f"attempt {a}")
        for sid in (0, 12345)
        for a in (0, 3, 9, 10)
    ]
    one_lines = 0
    for backend in ("local", "mpiexec", "slurm"):
        for ranks in (1, 16, 128):
            for name, what in starts:
                log = tmp_path / f"{name}-{backend}-{ranks}.log"
                job = Job(name, ("solver", "--steps", "100"), log_path=log, ranks=ranks)
                job.say_start(what, backend)
                lines = log.read_text().splitlines()
                facts = len(name + what + backend) + len(f"{ranks} ranks") - (ranks == 1)
                assert (len(lines) == 2) == (facts <= 34), (facts, lines)
                one_lines += len(lines) == 2
                assert all(len(line) <= 100 for line in lines), lines
                assert lines[-1] == MORE + "solver --steps 100", lines
                said = said_in_log(log.read_text())[0]
                assert f"starting {name} ({what}, {backend}, {ranks} rank" in said, said
                assert slurm_log(log) == (backend == "slurm"), lines
    assert one_lines > len(starts), one_lines  # (the usual ones)
    for backend in ("local", "slurm"):  # (the start line as it was written before)
        log = tmp_path / f"before-{backend}.log"
        log.write_text(
            f"{PREFIX}2026-12-07T21:53:38Z: starting simulation 0 attempt 0 as job sim-0\n"
            f"{MORE}({backend} backend, 1 rank):\n{MORE}solver\n"
        )
        assert slurm_log(log) == (backend == "slurm")
