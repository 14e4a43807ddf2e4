"""The package is typed (PEP 561): its wheel and sdist carry ``melissa_trainer/py.typed``,
so that a user's mypy checks their own training script against the package's types
(docs/how-to/hooks.md advises typing hooks against `TrainerView`). Without the marker,
mypy refuses to read an installed package ("module is installed, but missing library
stubs or py.typed marker", or "Cannot find implementation or library stub").

The oracle is mypy itself, run on a small user script against a non-editable install of
the wheel built from this repository (in a bare virtual environment of its own, so that
what mypy sees is the wheel and nothing else): the correct script passes
``mypy --strict``, and a script with one wrong type is caught, naming the package's
type (it could not be, were the package an untyped ``Any``)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest
from tooling import missing_tool

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.xdist_group("typed_package")]

#: what setuptools would leave in a source tree, or a checkout holds besides the sources
_NOT_COPIED = shutil.ignore_patterns(
    ".git", "build", "dist", "*.egg-info", ".venv*", "venv", "__pycache__", ".*_cache",
    ".hypothesis", ".tox", "runs", "outputs", "output", "site", "checkpoints",
)  # fmt: skip

USER_SCRIPT = textwrap.dedent(
    """
    from melissa_trainer import Hook, TrainerControl, TrainerState, TrainerView


    class StopAt(Hook):
        def __init__(self, step: int) -> None:
            self.step = step

        def on_step_end(
            self, trainer: TrainerView, state: TrainerState, control: TrainerControl
        ) -> None:
            if state.global_step >= self.step:
                control.should_stop = True
    """
)
#: the same hook reading `global_step` (an int) as a str: an error only typed code shows
WRONG_TYPE = USER_SCRIPT + textwrap.dedent(
    """

    def label(state: TrainerState) -> str:
        return state.global_step
    """
)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A wheel and an sdist built from a copy of the repository (setuptools writes build/
    and egg-info into the tree it builds), without network access."""
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("needs setuptools to build a wheel without network access")
    tmp = tmp_path_factory.mktemp("typed")
    repo, dist = tmp / "src", tmp / "dist"
    shutil.copytree(ROOT, repo, ignore=_NOT_COPIED)
    wheel = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(repo)],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert wheel.returncode == 0, wheel.stdout + wheel.stderr
    sdist = subprocess.run(
        [sys.executable, "-c",
         f"from setuptools import build_meta; build_meta.build_sdist({str(dist)!r})"],
        cwd=repo, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert sdist.returncode == 0, sdist.stdout + sdist.stderr
    (whl,) = dist.glob("melissa_trainer-*.whl")
    (tar,) = dist.glob("melissa_trainer-*.tar.gz")
    return whl, tar


@pytest.mark.timeout(300)
def test_the_wheel_and_the_sdist_carry_py_typed(built: tuple[Path, Path]) -> None:
    wheel, sdist = built
    assert "melissa_trainer/py.typed" in zipfile.ZipFile(wheel).namelist()
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    assert "melissa_trainer/py.typed" in names


def _mypy(script: Path, python: Path) -> subprocess.CompletedProcess[str]:
    """mypy --strict on `script`, finding installed packages where `python` does (its
    site-packages: PEP 561's rules, py.typed required), and nothing of this checkout."""
    (script.parent / "mypy.ini").write_text("[mypy]\n")  # a user's: none of this repository's
    cmd = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--python-executable",
           str(python), str(script)]  # fmt: skip
    return subprocess.run(
        cmd, cwd=script.parent, capture_output=True, text=True, timeout=240, check=False
    )


@pytest.mark.timeout(600)
def test_mypy_reads_the_types_of_an_installed_wheel(
    built: tuple[Path, Path], tmp_path: Path
) -> None:
    if importlib.util.find_spec("mypy") is None:
        missing_tool("needs mypy (in the test extra: pip install -e '.[test]')")
    wheel, _ = built
    # a bare environment holding the wheel only (no torch: mypy reads it as Any, which
    # keeps the check to the package's own types, and fast)
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True,
                   timeout=120)  # fmt: skip
    python = env / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.strip()  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", site,
         str(wheel)],
        check=True, capture_output=True, timeout=240,
    )  # fmt: skip
    good, bad = tmp_path / "user" / "train_hooks.py", tmp_path / "user_bad" / "train_hooks.py"
    for path, text in ((good, USER_SCRIPT), (bad, WRONG_TYPE)):
        path.parent.mkdir()
        path.write_text(text)

    checked = _mypy(good, python)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Success: no issues found" in checked.stdout
    wrong = _mypy(bad, python)
    assert wrong.returncode == 1, wrong.stdout + wrong.stderr
    # the one error: the package's own type, read from the wheel
    assert 'Incompatible return value type (got "int", expected "str")' in wrong.stdout
    assert wrong.stdout.count("error:") == 1, wrong.stdout
