"""Run alone by test_xdist_groups.py (not collected by the suite: no test_ prefix): each
test writes which pytest-xdist worker ran it, and how many workers the run had, to a file
named after it in the folder ``$MT_XDIST_GROUP_PROBE_OUT``."""

import os
from pathlib import Path

import pytest

OUT = os.environ.get("MT_XDIST_GROUP_PROBE_OUT")


def _note(name: str) -> None:
    if OUT is None:
        pytest.skip("run by tests/project/test_xdist_groups.py, which names its folder")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "none")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")
    (Path(OUT) / name).write_text(f"{worker} {count}")


# first in the collection: without the groups, xdist's first round sends its tests to
# both workers in turn (the group's tests 0 and 1 to gw0 and gw1)
@pytest.mark.xdist_group("probe")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i: int) -> None:
    _note(f"grouped-{i}")


@pytest.mark.parametrize("i", range(4))
def test_free(i: int) -> None:
    _note(f"free-{i}")
