"""Packaging hook (the metadata is in pyproject.toml): the wheel also carries the C
client's sources, clients/c, as melissa_trainer/_clients/c, so that `pip install
melissa-trainer` users can build it (`python -m melissa_trainer.build_c_client --build PREFIX`).
setuptools' package data only takes files inside a package; this copies the tree."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

C_CLIENT = Path(__file__).resolve().parent / "clients" / "c"


class BuildPyWithCClient(build_py):
    """build_py, then clients/c copied to melissa_trainer/_clients/c in the build."""

    def run(self) -> None:
        super().run()
        if not C_CLIENT.is_dir():  # (an sdist always has it: MANIFEST.in grafts it)
            raise FileNotFoundError(f"{C_CLIENT} is missing: the C client cannot be packaged")
        target = Path(self.build_lib) / "melissa_trainer" / "_clients" / "c"
        shutil.copytree(
            C_CLIENT,
            target,
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("build", "build-*", "__pycache__", "*.o", "*.mod"),
        )


setup(cmdclass={"build_py": BuildPyWithCClient})
