"""A C solver whose rendezvous path has a typo (not even its parent exists) was told so
in its waiting notice, 3 s in, but its final error, at the rendezvous timeout, said
"the directory does not exist" only (a user trial; the Python client's the same:
tests/client/test_rendezvous_words_final.py). The final error now carries the notice's
hint (clients/c/src/rendezvous.c). Failed before. The hint is now the
Python client's whole (missing_dir.c): where the path came from ("a typo in
mt_set_rendezvous", where C said "a typo in the path") and the directory likely meant
(a sibling close to the missing component: "did you mean ...?", which C did not say)."""

from __future__ import annotations

from pathlib import Path

import pytest
from c_driver import script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (script_exe's fixture)
from test_c_late_solver import start

pytestmark = pytest.mark.e2e  # every test here starts a process

HINT = (
    "does not exist either: a typo in mt_set_rendezvous is likely, unless its trainer has not "
    "started yet (the trainer creates {output_dir}/rendezvous, its files rank_<r>.json)"
)


@pytest.mark.timeout(120)
def test_the_final_error_keeps_the_typo_hint(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    typo = tmp_path / "ouptut" / "rendezvous"
    (tmp_path / "output").mkdir()  # (the directory meant)
    code, message, _ = start(script_exe, typo, tmp_path, 0.2)
    assert code != 0, message
    assert "the directory does not exist" in message, message
    assert message.endswith(
        f"its parent {tmp_path / 'ouptut'} {HINT}; did you mean {tmp_path}/output/rendezvous?"
    ), message  # (before: no hint, then no guess)
    (tmp_path / "out").mkdir()  # (the guard: its parent exists, the trainer may come)
    code, message, _ = start(script_exe, tmp_path / "out" / "rendezvous", tmp_path, 0.2)
    assert code != 0 and "the directory does not exist" in message, message
    assert "a typo" not in message, message
