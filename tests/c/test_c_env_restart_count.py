"""``SLURM_RESTART_COUNT`` (set by Slurm in a batch job it requeued: a launched client
that sees it above 0 skips the steps its receivers hold, `client.launched_env`,
clients/c/src/rerun.c) is judged alike by the Python and C clients: in a launched job
(``MELISSA_TRAINER_ATTEMPT`` set), anything but blanks or ASCII digits below 2**31 is
refused at the start in the same words; in a job started by hand it is not read."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 - the fixture
from test_c_env_parity import ID, OK, by_hand, c_start, python_start  # noqa: F401

COUNTS = [
    ("zero", "0"),
    ("one", "1"),
    ("ascii-blanks", " 2\t\n"),
    ("leading-zeros", "0" * 30 + "1"),
    ("largest", "2147483647"),
    ("empty", ""),
    ("blank", "   "),
    ("unicode-blank", "\u3000"),
    ("2**31", "2147483648"),
    ("far-too-large", "9" * 30),
    ("letters", "abc"),
    ("negative", "-1"),
    ("plus", "+1"),
    ("fraction", "1.0"),
    ("arabic-indic-digit", "\u0663"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("launched", [True, False], ids=["launched", "by-hand"])
@pytest.mark.parametrize("value", [v for _, v in COUNTS], ids=[n for n, _ in COUNTS])
def test_the_restart_count_is_judged_alike_and_a_mistyped_one_refused(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,  # noqa: F811
    value: str,
    launched: bool,
) -> None:
    env = {ID: "7", "MELISSA_TRAINER_ENDPOINTS": OK}
    if launched:
        env["MELISSA_TRAINER_ATTEMPT"] = "0"
    for name, v in {**env, "SLURM_RESTART_COUNT": value}.items():
        monkeypatch.setenv(name, v)
    got = python_start()
    assert c_start(script_exe, tmp_path, env) == got
    digits = value.strip()
    number = digits.isascii() and digits.isdigit() and int(digits) < 2**31
    assert got[0] == (number or not digits or not launched), got  # (the oracle: the rule)
    if not got[0]:
        assert got[1].startswith(f"SLURM_RESTART_COUNT={value!r} is not a restart count"), got
