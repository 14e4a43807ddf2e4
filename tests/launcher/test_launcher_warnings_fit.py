"""Every WARNING of the launcher fits a terminal of 100 columns (`log_lines.warn`, which
cuts it with `log_lines.cut`, as the Slurm queue's and the job-log lines already were).

Failed before: 18 WARNINGs passed 100 columns by their fixed wording alone, before any
value was put in (advice 4, Slurm steps 2, node failures 2, batch 2, MPICH's segment
record 2, and one each in step_stop, launcher_record, failure_policy, placement,
sampler_account, draw_log): the scan below found them (104 to 898 columns of words).
The ones a test can reach at small cost are also rendered here, with long realistic
values (simulation ids, exit codes, paths), and read back whole (`one_line`): every
line within 100 columns, the words as they were, a number kept with its unit.
The INFO lines are scanned alike (the console shows them too; `log_lines.inform`):
two passed 100 columns by their words (acquisition_spacing 207, launcher 121).
"""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import pytest
from launcher_said import COLUMNS, one_line, too_long

import melissa_trainer.launcher
from melissa_trainer import make_sampler
from melissa_trainer.launcher.acquisition_spacing import say_shrunk
from melissa_trainer.launcher.advice import Advice
from melissa_trainer.launcher.backends import placement
from melissa_trainer.launcher.backends.mpich_record import SegmentRecord
from melissa_trainer.launcher.sampler_account import warn_static_sampler

ROOT = Path(melissa_trainer.launcher.__file__).parent
#: a placeholder of a %-format, taken out of the fixed wording
PLACEHOLDER = re.compile(r"%[-+ #0-9.]*[sdrfgi%]")


def _wording(node: ast.expr) -> str | None:
    """The fixed text of a message argument (a literal, an f-string's literal parts,
    a sum of them), without its placeholders; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return PLACEHOLDER.sub("", node.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        parts = [_wording(node.left), _wording(node.right)]
        return None if None in parts else "".join(p or "" for p in parts)
    return None


@pytest.mark.timeout(60)
@pytest.mark.parametrize("level", ["warning", "info"])
def test_no_launcher_warning_is_longer_than_a_line_by_its_words_alone(level: str) -> None:
    """A ``.warning(...)`` (or ``.info(...)``: the console shows INFO too) call in
    melissa_trainer/launcher whose fixed wording alone is longer than a line prints a
    line longer than the terminal whatever its values: such a text goes through
    `log_lines.warn` (`log_lines.inform`) instead. Failed before for INFO: two lines,
    acquisition_spacing.py (207 columns of words) and launcher.py (121)."""
    long: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == level
                and node.args
                and (words := _wording(node.args[0])) is not None
                and len(words) > COLUMNS
            ):
                long.append(f"{path.relative_to(ROOT)}:{node.lineno} ({len(words)})")
    assert long == [], long


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.timeout(60)
def test_the_advice_warnings_fit_100_columns(caplog: pytest.LogCaptureFixture) -> None:
    """The four once-per-study advices, each from a fresh `Advice`."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    runs = {
        "start-up": lambda a: (a.first_message(123456, 48.25, "c"), a.ended(123456, 0, 50.5)),
        "exit 75": lambda a: a.failed(123456, [75, 75]),
        "start-up hang": lambda a: (
            [a.ended(123456, "timeout", 30.0) for _ in range(2)]
            + [a.failed(123456, ["timeout", "timeout"])]
        ),
        "exit 3": lambda a: a.failed(123456, [3, 3]),
    }
    for case, run in runs.items():
        caplog.clear()
        run(Advice(worker_mode=False, worker_hint="--worker (examples/heat/run_study.py)"))
        (said,) = _warnings(caplog)
        assert too_long(said) == [], (case, said)
        whole = one_line(said)
        assert len(whole) > COLUMNS and "\n" in said, (case, said)  # (cut, not shortened)
        assert whole.startswith("simulation 123456 "), whole
        assert whole.endswith(" Said once per study."), whole
        if case == "start-up":  # (a number kept with its unit)
            assert "48.2 s of its 50.5 s" in one_line(said)
            assert all(not line.rstrip().endswith((" 48.2", " 50.5")) for line in said.split("\n"))


@pytest.mark.timeout(60)
def test_a_missing_nice_and_a_static_sampler_fit_100_columns(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    monkeypatch.setattr(placement, "_renice_warned", [])
    placement.renice_group(2**22 + 12345, 5)  # (no such group: the renice is refused)
    warn_static_sampler(make_sampler("surrogate", {"nu": (0.01, 0.01), "c": (0.5, 0.5)}), 100)
    said = _warnings(caplog)
    assert [too_long(s) for s in said] == [[], []], said
    assert one_line(said[0]).startswith("no `nice` program on PATH: jobs are reniced just")
    assert one_line(said[1]).endswith("the per-simulation losses are tracked all the same")


@pytest.mark.timeout(60)
def test_a_segment_record_that_cannot_be_written_fits_100_columns(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    """The record's path (a long one, whole on a line) and the OSError's words."""
    caplog.set_level(logging.WARNING, logger="melissa_trainer.launcher")
    record = SegmentRecord()
    path = record.path = str(tmp_path / "gone" / ("melissa_trainer_" + "s" * 40 + "_1000.segments"))
    record.launching()  # (its directory is missing: the write fails)
    (said,) = _warnings(caplog)
    # (a line longer than 100 columns is one word alone: a path, never cut)
    assert all(" " not in line.strip() for line in too_long(said)), said
    assert f"  {path}" in said.split("\n"), said  # (the path whole, on its line)
    assert one_line(said).endswith("leaves its jobs' segments for you to remove"), said


@pytest.mark.timeout(60)
def test_the_surrogate_samplers_shrunk_spacing_info_fits_100_columns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The INFO line of a sampler whose space fills up (`say_shrunk`), with long values:
    cut (failed before: one line of 231 columns), the words whole."""
    caplog.set_level(logging.INFO, logger="melissa_trainer.launcher")
    say_shrunk(0.0123456, 1234567, 0.000123456)
    (said,) = [r.getMessage() for r in caplog.records if "surrogate sampler" in r.getMessage()]
    assert too_long(said) == [] and "\n" in said, said
    assert one_line(said) == (
        "surrogate sampler: no candidate keeps spacing=0.0123456 from the 1234567 draws "
        "remembered (the space is filling up at that spacing): acquisitions now keep half "
        "the largest gap the candidates reach (0.000123 at this draw; said once)"
    ), said
