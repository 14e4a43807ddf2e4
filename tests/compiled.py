"""Shared helpers for tests of compiled code against the C client (clients/c).

`c_client` (a session-scoped fixture: import it into a test module with
``from compiled import c_client  # noqa: F401``, or use `build_c_client`) builds
and installs the library once per session with cmake into a temporary directory, and
skips, saying why, when a tool is missing (cmake, a C compiler, pkg-config, libzmq).
It returns a `CClient`: the install prefix and `compile`, which builds a C file into an
executable linked with the library (with the MPI compiler wrapper for ``mpi=True``).
`sanitized_c_client` is the same library built with ``-fsanitize=address,undefined``.
``MT_TEST_SANITIZE=1`` (or a list such as ``address``) in the environment builds `c_client`
itself with those sanitizers, and every program the tests compile against it (C, MPI C and
Fortran): the whole of tests/c then runs under them (docs: clients/c/README.md).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from helpers import find_mpiexec
from tooling import missing_tool

REPO = Path(__file__).resolve().parent.parent
C_SOURCE = REPO / "clients" / "c"
SANITIZE = "address,undefined"
#: The environment sanitized executables run with (leaks reported, UB fatal).
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}
#: The same for a program linked with the system's MPI, as mpif90 links it (the mpich
#: wheel has no Fortran: Debian's libmpich 4.0.2 then): its hwloc without the "pci"
#: plugin. MPI_Init runs hwloc, whose pci plugin (libpciaccess) allocates into its own
#: static data; hwloc dlcloses it at MPI_Finalize, so LeakSanitizer found 1016 bytes in 9
#: blocks per rank no longer referenced, allocated from an "<unknown module>" (unloaded:
#: no suppression can name it). The same under the system's mpiexec: not a launcher
#: mismatch. No suppression either: every frame, ours and the program's, stays checked.
MPI_SANITIZER_ENV = {**SANITIZER_ENV, "HWLOC_COMPONENTS": "-pci"}


def sanitize_requested() -> str:
    """The sanitizers ``MT_TEST_SANITIZE`` asks every C client build for ("" if none):
    ``1`` means address,undefined."""
    value = os.environ.get("MT_TEST_SANITIZE", "").strip()
    return SANITIZE if value in ("1", "yes", "on") else "" if value in ("", "0") else value


def c_toolchain_missing() -> str | None:
    """Why the C client cannot be built here, or None if it can."""
    for tool in ("cmake", "pkg-config"):
        if shutil.which(tool) is None:
            return f"needs {tool} to build the C client (clients/c)"
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        return "needs a C compiler (cc or gcc) to build the C client"
    if subprocess.run(["pkg-config", "--exists", "libzmq >= 4.3"], check=False).returncode:
        return "needs libzmq >= 4.3 with pkg-config (apt-get install libzmq3-dev)"
    return None


def _run(argv: Sequence[str | os.PathLike[str]], what: str, timeout: float = 300) -> None:
    proc = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode:
        raise AssertionError(f"{what} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")


@dataclass(frozen=True)
class CClient:
    """An installed C client: `prefix` (include/, lib/, lib/cmake/, lib/pkgconfig/)."""

    prefix: Path
    build_dir: Path
    sanitize: str = ""
    cflags: tuple[str, ...] = field(default=("-std=c11", "-Wall", "-Wextra", "-Werror", "-g"))

    @property
    def include_dir(self) -> Path:
        return self.prefix / "include"

    @property
    def lib_dir(self) -> Path:
        return self.prefix / "lib"

    def env(self) -> dict[str, str]:
        """Variables for consumers (cmake's find_package, pkg-config) of this install."""
        return {
            "CMAKE_PREFIX_PATH": str(self.prefix),
            "PKG_CONFIG_PATH": str(self.lib_dir / "pkgconfig"),
        }

    def compile(
        self,
        source: str | os.PathLike[str],
        output: str | os.PathLike[str],
        *,
        mpi: bool = False,
        extra: Sequence[str] = (),
    ) -> Path:
        """Compile the C file `source` into the executable `output`, linked with the
        shared library (rpath set); ``mpi=True`` uses the MPI wrapper `mpicc` next to
        the tests' mpiexec (skips if there is none). Raises AssertionError with the
        compiler's output on failure."""
        compiler = find_mpicc() if mpi else shutil.which("gcc") or "cc"
        if compiler is None:
            missing_tool("needs mpicc next to mpiexec (pip install mpich)")
        flags = list(self.cflags)
        if self.sanitize:
            flags += [f"-fsanitize={self.sanitize}", "-fno-omit-frame-pointer"]
        argv = [
            compiler,
            *flags,
            f"-I{self.include_dir}",
            str(source),
            "-o",
            str(output),
            f"-L{self.lib_dir}",
            f"-Wl,-rpath,{self.lib_dir}",
            "-lmelissa_trainer_client",
            "-lm",
            *extra,
        ]
        _run(argv, f"compiling {source}")
        return Path(output)


def compile_fortran_program(client: CClient, source: str, out_dir: Path, name: str) -> Path:
    """The Fortran program `source` built against `client`'s installed module (gfortran,
    -std=f2018 -Wall -Werror) into out_dir/name; skips without gfortran or the module."""
    modules, lib = client.prefix / "include" / "fortran", client.lib_dir
    if shutil.which("gfortran") is None:
        missing_tool("needs gfortran")
    if not (modules / "melissa_trainer.mod").exists():
        missing_tool("the Fortran module was not built (MT_FORTRAN off: no Fortran compiler)")
    path = out_dir / f"{name}.f90"
    path.write_text(source)
    binary = out_dir / name
    # a sanitized library needs the runtime linked into the program (it must come first)
    sanitize = [f"-fsanitize={client.sanitize}", "-g"] if client.sanitize else []
    _run(["gfortran", "-std=f2018", "-Wall", "-Werror", *sanitize, f"-I{modules}", path,
          "-o", binary, f"-L{lib}", "-lmelissa_trainer_fortran", "-lmelissa_trainer_client",
          f"-Wl,-rpath,{lib}"], f"compiling {path}")  # fmt: skip
    return binary


def preload_shim(client: CClient, source: str, out_dir: Path) -> str:
    """The LD_PRELOAD value for the C `source` of a shim (one that wraps a libzmq call
    of the driver's: ``dlsym(RTLD_NEXT, ...)``) built as a shared library into
    `out_dir`: the shim alone, or after ASan's runtime, which must come first, when
    `client` is built with it (MT_TEST_SANITIZE)."""
    compiler = shutil.which("gcc") or "cc"
    (out_dir / "shim.c").write_text(source)
    shim = out_dir / "shim.so"
    _run([compiler, "-shared", "-fPIC", out_dir / "shim.c", "-o", shim, "-ldl"], "the shim", 120)
    if not client.sanitize:
        return str(shim)
    asan = subprocess.run(
        [compiler, "-print-file-name=libasan.so"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return f"{asan} {shim}"


def find_mpicc() -> str | None:
    """The MPI C compiler wrapper of the tests' mpiexec (the mpich wheel's), or None."""
    mpiexec = find_mpiexec()
    if mpiexec is None:
        return None
    candidate = Path(mpiexec).parent / "mpicc"
    return str(candidate) if os.access(candidate, os.X_OK) else None


def build_c_client(
    root: Path, *, sanitize: str = "", tests: bool = False, build_type: str = "RelWithDebInfo"
) -> CClient:
    """Configure, build and install clients/c under `root` (skips without the tools)."""
    reason = c_toolchain_missing()
    if reason is not None:
        missing_tool(reason)
    build, prefix = root / "build", root / "prefix"
    configure = [
        "cmake",
        "-S",
        C_SOURCE,
        "-B",
        build,
        f"-DCMAKE_BUILD_TYPE={build_type}",
        f"-DMT_SANITIZE={sanitize}",
        f"-DMT_BUILD_TESTS={'ON' if tests else 'OFF'}",
        f"-DCMAKE_INSTALL_PREFIX={prefix}",
        "-DCMAKE_INSTALL_LIBDIR=lib",
    ]
    _run(configure, "cmake configure of clients/c")
    _run(["cmake", "--build", build, "--parallel", "2"], "cmake --build of clients/c")
    _run(["cmake", "--install", build], "cmake --install of clients/c")
    return CClient(prefix=prefix, build_dir=build, sanitize=sanitize)


def sanitizer_missing() -> str | None:
    """Why -fsanitize=address,undefined programs cannot be built and run here, or None."""
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        return "needs a C compiler"
    probe = subprocess.run(
        [compiler, f"-fsanitize={SANITIZE}", "-x", "c", "-", "-o", os.devnull],
        input="int main(void) { return 0; }\n",
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode:
        return f"the sanitizer runtimes (libasan, libubsan) are missing: {probe.stderr[-300:]}"
    return None


# Each test module that imports a fixture gets a fixture definition of its own, so a
# session-scoped fixture would run once per module: the builds are memoized here instead
# (keyed by kind). Under pytest-xdist each worker is a session of its own: the build
# directory is then the run's, shared by its workers (`shared_build`), and the first
# worker to need it builds it under a file lock while the others wait and reuse it.
_BUILT: dict[str, CClient] = {}
#: the longest a worker waits for another's build (each of its cmake steps is bounded)
BUILD_WAIT = 900.0


@contextlib.contextmanager
def alarm_paused() -> Iterator[None]:
    """Pause the SIGALRM timer (pytest-timeout's, of the test being set up) meanwhile:
    a one-off build for the whole run, or the wait for another worker's, is not the
    test's time. What runs inside must bound itself (cmake steps, `BUILD_WAIT`)."""
    remaining, _ = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if remaining > 0:
            signal.setitimer(signal.ITIMER_REAL, remaining)


def shared_build(tmp_path_factory: pytest.TempPathFactory, name: str, **options: Any) -> CClient:
    """`build_c_client(root, **options)` once per test run, however many xdist workers
    ask: `root` is ``NAME`` under the run's temporary directory (the workers' common
    parent under xdist, this session's own otherwise). A build that raised leaves no
    ``built`` mark, so the next worker tries again and reports its own error."""
    if name in _BUILT:
        return _BUILT[name]
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # pytest-N/, the parent of every worker's popen-gwK/
    root = base / name
    with alarm_paused(), FileLock(str(base / f"{name}.lock"), timeout=BUILD_WAIT):
        if (root / "built").exists():
            client = CClient(root / "prefix", root / "build", options.get("sanitize", ""))
        else:
            shutil.rmtree(root, ignore_errors=True)  # a failed try's leftovers
            root.mkdir()
            client = build_c_client(root, **options)
            (root / "built").touch()
    _BUILT[name] = client
    return client


@pytest.fixture(scope="session")
def c_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CClient]:
    """The C client, built and installed once per run (skips without the tools); with
    `sanitize_requested`'s sanitizers when ``MT_TEST_SANITIZE`` asks for them."""
    sanitize = sanitize_requested()
    reason = c_toolchain_missing() or (sanitizer_missing() if sanitize else None)
    if reason is not None:
        missing_tool(reason)
    if sanitize:
        yield shared_build(tmp_path_factory, "c_client_sanitized", sanitize=sanitize)
    else:
        yield shared_build(tmp_path_factory, "c_client")


@pytest.fixture(scope="session")
def sanitized_c_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CClient]:
    """The C client built with -fsanitize=address,undefined, and its CTest unit tests."""
    reason = c_toolchain_missing() or sanitizer_missing()
    if reason is not None:
        missing_tool(reason)
    yield shared_build(
        tmp_path_factory, "c_client_asan", sanitize=SANITIZE, tests=True, build_type="Debug"
    )
