"""The Slurm backend without Slurm: its batch scripts (and one run by bash), its time
limit and option checks, the command lines it runs and the parsers of their output, its
job names, its submission environment, and the exit code a job's final state means."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from melissa_trainer.launcher.backends.base import study_id
from melissa_trainer.launcher.backends.slurm import queries as sq
from melissa_trainer.launcher.backends.slurm import script as ss

PYTHON = sys.executable


def test_time_limit_and_option_validation() -> None:
    assert ss.normalize_time_limit(None) is None
    assert ss.normalize_time_limit(90) == "90"
    for text in ("30", "10:00", "01:30:00", "2-00", "1-12:00:00"):
        assert ss.normalize_time_limit(text) == text
    # no limit, in Slurm's words: the int 0 was refused, the string "0" taken, and
    # sbatch's UNLIMITED/INFINITE refused (all four mean --time's no limit to sbatch)
    assert ss.normalize_time_limit(0) == "0" and ss.normalize_time_limit("0") == "0"
    for text in ("UNLIMITED", "unlimited", " Infinite "):
        assert ss.normalize_time_limit(text) == "UNLIMITED"
    for bad in (-1, -5, "1h", "1:2:3:4", "", "UNLIMITEDX", True, 1.5):
        with pytest.raises(ValueError, match="time_limit"):
            ss.normalize_time_limit(bad)  # type: ignore[arg-type]
    assert ss.check_extra_args("extra_args", ["--mem=4G", "-A abc"]) == ("--mem=4G", "-A abc")
    with pytest.raises(TypeError, match="extra_args must be a sequence"):
        ss.check_extra_args("extra_args", "--mem=4G")
    with pytest.raises(ValueError, match="srun_args: each item must be one option"):
        ss.check_extra_args("srun_args", ["4G"])
    with pytest.raises(ValueError, match="each item"):
        ss.check_extra_args("extra_args", ["--comment=a\n#SBATCH --mem=1T"])


def script(**overrides) -> str:  # type: ignore[no-untyped-def]
    args = dict(
        name="sim-3",
        argv=["/venv/bin/python", "sim.py", "--alpha", "0.5 1"],
        ranks=1,
        cwd="/work/study dir",
        exit_stem="/work/logs/sim-3",
        env={"MELISSA_TRAINER_SIMULATION_ID": "3", "MELISSA_TRAINER_PARAMETERS": '{"a": 1}'},
        log_path="/work/logs/sim-3.log",
    )
    args.update(overrides)
    return ss.batch_script(**args)  # type: ignore[arg-type]


def test_batch_script_of_one_rank() -> None:
    lines = script(partition="gpu", time_limit="00:10:00", extra_args=["--mem=4G"]).splitlines()
    assert lines[0] == "#!/bin/bash"
    directives = [line for line in lines if line.startswith("#SBATCH")]
    assert directives == [
        "#SBATCH --job-name=sim-3",
        "#SBATCH --output=/work/logs/sim-3.log",
        "#SBATCH --open-mode=append",
        "#SBATCH --ntasks=1",
        "#SBATCH --partition=gpu",
        "#SBATCH --time=00:10:00",
        "#SBATCH --mem=4G",
    ]
    assert "export MELISSA_TRAINER_SIMULATION_ID=3" in lines
    assert """export MELISSA_TRAINER_PARAMETERS='{"a": 1}'""" in lines
    # one rank: the command runs directly in the batch step (no srun), not exec'd
    assert "cd -- '/work/study dir' && /venv/bin/python sim.py --alpha '0.5 1'" in lines
    assert lines[-3:] == [
        "code=$?",
        'printf "%s\\n" "$code" > /work/logs/sim-3."$SLURM_JOB_ID".exit.tmp && '
        'mv -f -- /work/logs/sim-3."$SLURM_JOB_ID".exit.tmp /work/logs/sim-3."$SLURM_JOB_ID".exit',
        'exit "$code"',
    ]


def test_batch_script_of_several_ranks_uses_srun() -> None:
    text = script(ranks=4, srun_args=["--mpi=pmi2"], log_path="/logs/100%/sim 3.log")
    assert "#SBATCH --ntasks=4" in text
    assert '#SBATCH --output="/logs/100%%/sim 3.log"' in text  # % escaped, blanks quoted
    assert "&& srun --ntasks=4 --kill-on-bad-exit=1 --mpi=pmi2 /venv/bin/python sim.py" in text
    assert "--partition" not in text and "--time" not in text


def test_batch_script_refuses_what_it_cannot_write() -> None:
    with pytest.raises(ValueError, match="'BAD-NAME' is not valid"):
        script(env={"BAD-NAME": "x"})
    with pytest.raises(ValueError, match="quote or a newline"):
        script(name='a"b')
    with pytest.raises(ValueError, match="empty command"):
        script(argv=[])
    with pytest.raises(ValueError, match="ranks must be >= 1"):
        script(ranks=0)


@pytest.mark.e2e
@pytest.mark.timeout(30)
def test_batch_script_runs_under_bash_and_writes_its_exit_code(tmp_path: Path) -> None:
    """The script outside Slurm (#SBATCH lines are comments): the variables, quoted,
    reach the command, which runs in cwd; its exit code lands in the exit file."""
    cwd = tmp_path / "a dir"
    cwd.mkdir()
    tricky = 'it\'s $HOME `x` "q" \\ end\nline2'
    code = "import os, sys; open('seen', 'w').write(os.environ['V']); sys.exit(int(sys.argv[1]))"
    text = ss.batch_script(
        name="t",
        argv=[PYTHON, "-c", code, "3"],
        ranks=1,
        cwd=str(cwd),
        exit_stem=str(tmp_path / "t"),
        env={"V": tricky},
    )
    path = tmp_path / "t.sbatch"
    path.write_text(text)
    result = subprocess.run(["bash", str(path)], env={**os.environ, "SLURM_JOB_ID": "77"})
    assert result.returncode == 3
    assert (cwd / "seen").read_text() == tricky
    assert (tmp_path / ss.exit_file("t", "77")).read_text() == "3\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_command_lines_and_parsers() -> None:
    assert sq.sbatch_command("/s/x.sbatch", "/bin/sbatch") == [
        "/bin/sbatch",
        "--parsable",
        "--export=ALL",
        "/s/x.sbatch",
    ]
    assert sq.own_jobs_command("squeue", uid=1000) == [
        "squeue", "-h", "-u", "1000", "-o", "%i|%T|%j"
    ]  # fmt: skip
    assert sq.parse_own_jobs("7|RUNNING|mt-ab12-sim-1\n8|PENDING|a|b\n\nbad\n") == [
        ("7", "RUNNING", "mt-ab12-sim-1"),
        ("8", "PENDING", "a|b"),
    ]
    assert sq.parse_sbatch("1234\n") == "1234"
    assert sq.parse_sbatch("1234;cluster\n") == "1234"
    with pytest.raises(ValueError, match="no job id"):
        sq.parse_sbatch("Submitted batch job 12\n")
    assert sq.squeue_command(["1", "2"]) == [
        "squeue",
        "-h",
        "-t",
        "all",
        "-j",
        "1,2",
        "-o",
        "%i|%T|%r|%N|%S",
    ]
    assert sq.parse_squeue("1|RUNNING\n2|CANCELLED\n\n") == {"1": "RUNNING", "2": "CANCELLED"}
    out = "1|RUNNING|None\n2|PENDING|BeginTime\n3|PENDING|None\n4|COMPLETED|None\n"
    assert sq.parse_squeue(out) == {
        "1": "RUNNING",
        "2": "PENDING",
        "3": "PENDING",
        "4": "COMPLETED",
    }
    assert sq.parse_squeue_reasons(out) == {"2": "BeginTime"}
    out = "1|RUNNING|None|n1\n2|PENDING|BeginTime|\n3|PENDING|Resources|(null)\n"
    out += "4|FAILED|None|n[1-2]\n"
    assert sq.parse_squeue_reasons(out) == {"2": "BeginTime", "3": "Resources"}  # (not |nodes)
    assert sq.parse_squeue_nodes(out) == {"1": "n1", "4": "n[1-2]"}
    out = "5|PENDING|BeginTime||2026-12-05T23:25:37\n6|PENDING|Priority||N/A\n"
    out += "7|RUNNING|None|n1|2026-12-05T23:25:30\n"
    assert sq.parse_squeue_starts(out) == {"5": "2026-12-05T23:25:37"}  # (pending, known)
    assert sq.sacct_command("5") == ["sacct", "-j", "5", "-n", "-X", "-P", "-o", "State,ExitCode"]
    assert sq.parse_sacct("CANCELLED by 0|0:15\n") == ("CANCELLED", "0:15")
    assert sq.parse_sacct("") is None
    assert sq.scontrol_command("5") == ["scontrol", "show", "job", "-o", "5"]
    record = "JobId=5 JobName=sim-1 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 X=a=b"
    assert sq.parse_scontrol(record) == ("FAILED", "3:0")
    assert sq.parse_scontrol("slurm_load_jobs error: Invalid job id specified") is None
    assert sq.scancel_command(["5", "6"]) == ["scancel", "5", "6"]
    assert sq.scancel_command(["5"], signal="KILL") == ["scancel", "--full", "--signal=KILL", "5"]
    srun = ss.srun_command(name="sim-1", argv=["a"], ranks=2, time_limit="5", srun_args=["-v"])
    assert srun == [
        "srun", "--ntasks=2", "--exclusive", "--job-name=sim-1", "--kill-on-bad-exit=1",
        "--time=5", "-v", "a",
    ]  # fmt: skip
    # (one task: one node, whatever the trainer's SLURM_NNODES; test_slurm_srun_two_nodes)
    one = ss.srun_command(name="sim-1", argv=["a"], ranks=1)
    assert one == ["srun", "--ntasks=1", "--exclusive", "--job-name=sim-1", "--nodes=1", "a"]


def test_job_names_carry_the_study(tmp_path: Path) -> None:
    assert ss.job_name("sim-12", "3fa2b1c9") == "mt-3fa2b1c9-sim-12"
    assert ss.job_name("sim-12").startswith("mt-")
    assert ss.job_name("sim-1", "ab").startswith(ss.study_prefix("ab"))
    assert not ss.job_name("sim-1", "ab2").startswith(ss.study_prefix("ab"))
    # the study's identity: stable for one directory (however it is spelled), short
    (tmp_path / "run").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "run")
    same = study_id(tmp_path / "run")
    assert len(same) == 8 and int(same, 16) >= 0
    assert study_id(str(tmp_path / "run")) == same == study_id(tmp_path / "link")
    assert study_id(tmp_path / "other") != same


def test_submission_env_leaves_out_the_enclosing_allocation() -> None:
    environ = {
        "PATH": "/bin",
        "HOME": "/root",
        "SLURM_CONF": "/etc/slurm.conf",
        "SLURM_JOB_ID": "12",
        "SLURM_NTASKS": "64",
        "SLURM_CPUS_PER_TASK": "8",
        "SRUN_CPUS_PER_TASK": "8",
        "SALLOC_PARTITION": "x",
        "SBATCH_ACCOUNT": "abc",
        "MY_SLURM_THING": "kept",
    }
    assert ss.submission_env(environ) == {
        "PATH": "/bin",
        "HOME": "/root",
        "SLURM_CONF": "/etc/slurm.conf",
        "SBATCH_ACCOUNT": "abc",
        "MY_SLURM_THING": "kept",
    }


@pytest.mark.parametrize(
    ("state", "code", "expected"),
    [
        ("COMPLETED", "0:0", 0),
        ("FAILED", "3:0", 3),
        ("CANCELLED", "0:15", 143),
        ("TIMEOUT", "0:0", 1),
        ("OUT_OF_MEMORY", "0:125", 253),
        ("NODE_FAIL", "", 1),
        ("FAILED", "garbage", 1),
    ],
)
def test_exit_code_from_state(state: str, code: str, expected: int) -> None:
    assert sq.exit_code(state, code) == expected


@pytest.mark.timeout(10)
def test_a_job_name_of_the_users_is_refused() -> None:
    # (the backend finds and cancels its jobs and steps by the name it gives them,
    # `job_name`; an option of the user's naming them otherwise came after ours, which
    # the last one wins over: the study's jobs went unfound, a step's tasks left to run)
    for arg in ("--job-name=x", "--job-name x", "--job-n=x", "-J", "-Jx", "-J x"):
        for option in ("extra_args", "srun_args"):
            with pytest.raises(ValueError, match=f"{option}: .*names every job"):
                ss.check_extra_args(option, ["--mem=4G", arg])
    kept = ["--jobid=5", "--mem=4G", "--comment=--job-name", "-A abc"]
    assert ss.check_extra_args("srun_args", kept) == tuple(kept)
