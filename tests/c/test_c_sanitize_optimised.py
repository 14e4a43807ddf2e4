"""The C client under sanitizers in an optimised build, and the opt-in that runs all of
tests/c under them (``MT_TEST_SANITIZE=1``: `compiled.sanitize_requested`).

``cmake -DMT_SANITIZE=address,undefined`` (the cache option clients/c/CMakeLists.txt
documents) with the default build type (Release, -O3) or RelWithDebInfo (-O2) did not
build: GCC's -fsanitize=undefined check of vsnprintf's nonnull format left a path with a
null format, which -Wformat-truncation reported, -Werror an error (src/errors.c,
set_error). The sanitizer tests built -O0 (Debug), where that pass does not run. Now
every source compiles warning-free at -O2 and -O3 under the sanitizers; the programs
themselves run under them in the tests of `compiled.sanitized_c_client` and, with the
opt-in, in every test of tests/c.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from compiled import C_SOURCE, SANITIZE, c_toolchain_missing, sanitize_requested, sanitizer_missing
from tooling import missing_tool

#: the library's own flags (clients/c/CMakeLists.txt: MT_WARNINGS, MT_SANITIZE_FLAGS)
FLAGS = ["-g", f"-fsanitize={SANITIZE}", "-fno-omit-frame-pointer", "-std=c11"]
FLAGS += ["-Wall", "-Wextra", "-Wpedantic", "-Werror"]


def test_the_opt_in_names_the_sanitizers(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, want in (("", ""), ("0", ""), ("1", SANITIZE), ("address", "address")):
        monkeypatch.setenv("MT_TEST_SANITIZE", value)
        assert sanitize_requested() == want, value
    monkeypatch.delenv("MT_TEST_SANITIZE")
    assert sanitize_requested() == ""


@pytest.mark.e2e
@pytest.mark.timeout(240)
@pytest.mark.parametrize("level", ["-O2", "-O3"])
def test_every_source_compiles_warning_free_optimised_under_sanitizers(
    level: str, tmp_path: Path
) -> None:
    """Each of clients/c/src/*.c, as CMake compiles it with MT_SANITIZE=address,undefined
    at RelWithDebInfo (-O2) and Release (-O3); errors.c failed at both."""
    reason = c_toolchain_missing() or sanitizer_missing()
    if reason is not None:
        missing_tool(reason)
    compiler = shutil.which("gcc") or shutil.which("cc")
    assert compiler is not None
    zmq = subprocess.run(
        ["pkg-config", "--cflags", "libzmq"], capture_output=True, text=True, check=True
    ).stdout
    include = [f"-I{C_SOURCE / 'include'}", *shlex.split(zmq)]

    def compile_one(source: Path) -> tuple[str, int, str]:
        argv = [compiler, level, *FLAGS, *include, "-c", str(source), "-o",
                str(tmp_path / f"{source.stem}.o")]  # fmt: skip
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        return source.name, proc.returncode, proc.stderr

    sources = sorted((C_SOURCE / "src").glob("*.c"))
    assert len(sources) > 20
    with ThreadPoolExecutor(max_workers=2) as pool:  # (two compilers: the tests' 2 cores)
        results = list(pool.map(compile_one, sources))
    failed = [f"{name} ({code}):\n{err}" for name, code, err in results if code or err]
    assert not failed, "\n".join(failed)
