"""Build the C client library and the benchmark's programs, and run them.

`build(directory)` configures and builds `clients/c` with CMake (Release, the Fortran
module off) into `directory/lib`, then compiles `drain.c`, `send_bench.c` and
`stream_client.c` of this directory with the C compiler (`$CC`, else cc or gcc),
`-O2` and the project's warnings as errors, against the library and libzmq. CMake and
make rebuild only what changed, so a directory kept between runs builds in seconds.
A missing tool (cmake, a C compiler, libzmq's header or library) raises `MissingTool`
saying which; any other failure raises RuntimeError with the tool's output.

`Programs` holds the built programs' paths and starts them (stdout and stderr piped,
text mode); `reap` kills and waits what is still running, so that no process outlives
the benchmark.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = HERE.parents[1] / "clients" / "c"
CFLAGS = ["-std=c11", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror"]
ZMQ_PROBE = "#include <zmq.h>\nint main(void) { int a, b, c; zmq_version(&a, &b, &c); return 0; }\n"


class MissingTool(RuntimeError):
    """A tool the build needs is not there (the message says which)."""


@dataclass(frozen=True)
class Programs:
    """The built programs (absolute paths)."""

    drain: Path
    send_bench: Path
    stream_client: Path

    @staticmethod
    def popen(command: Sequence[str | Path]) -> subprocess.Popen[str]:
        """Start `command` with stdin, stdout and stderr piped (text)."""
        return subprocess.Popen(
            [str(c) for c in command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @staticmethod
    def run(command: Sequence[str | Path], timeout: float) -> str:
        """Run `command` to its end; its stdout, or RuntimeError with its stderr if it
        failed or ran past `timeout` seconds (then killed)."""
        try:
            done = subprocess.run(
                [str(c) for c in command], capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as e:
            raise RuntimeError(f"{Path(str(command[0])).name} ran past {timeout} s") from e
        if done.returncode != 0:
            raise RuntimeError(
                f"{Path(str(command[0])).name} exited {done.returncode}: {done.stderr.strip()}"
            )
        return done.stdout

    def spawn_ready(self, command: Sequence[str]) -> subprocess.Popen[str]:
        """Start a client process and wait for its "ready" line (it then waits for a
        line on stdin); RuntimeError with its stderr if it says anything else."""
        proc = self.popen(command)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if line.strip() != "ready":
            self.reap(proc)
            raise RuntimeError(f"a client failed to start: {line!r} {self.stderr_of(proc)}")
        return proc

    @staticmethod
    def reap(proc: subprocess.Popen[str]) -> None:
        """Kill `proc` if it still runs, wait for it and close its pipes."""
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                pipe.close()

    @staticmethod
    def stderr_of(proc: subprocess.Popen[str]) -> str:
        """What an ended process wrote on stderr (after `reap` or its own exit)."""
        if proc.poll() is None:
            return "(still running)"
        return proc.stderr.read().strip() if proc.stderr is not None else ""


def _compiler() -> str:
    named = os.environ.get("CC")
    cc = shutil.which(named) if named else shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise MissingTool(f"no C compiler: CC={named} not found" if named else "no C compiler: "
                          "set CC or install cc (gcc)")  # fmt: skip
    return cc


def _zmq_flags(cc: str, directory: Path) -> tuple[list[str], list[str]]:
    """(compile flags, link flags) of libzmq: pkg-config's, else plain -lzmq; checked by
    compiling and linking a program calling zmq_version."""
    cflags, libs = [], ["-lzmq"]
    if shutil.which("pkg-config"):
        found = subprocess.run(
            ["pkg-config", "--cflags", "--libs", "libzmq"], capture_output=True, text=True
        )
        if found.returncode == 0:
            flags = shlex.split(found.stdout)
            cflags = [f for f in flags if f.startswith(("-I", "-D"))]
            libs = [f for f in flags if not f.startswith(("-I", "-D"))]
    probe = directory / "zmq_probe.c"
    probe.write_text(ZMQ_PROBE)
    done = subprocess.run(
        [cc, *cflags, str(probe), *libs, "-o", str(directory / "zmq_probe")],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise MissingTool(f"libzmq (zmq.h and -lzmq) not found: {done.stderr.strip()[:300]}")
    return cflags, libs


def _checked(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip()[-3000:]
        raise RuntimeError(f"{what} failed ({shlex.join(command)}):\n{output}")


def _library(lib_dir: Path) -> Path:
    """The library CMake built: the static one if there is one (no run-time path)."""
    for pattern in ("libmelissa_trainer*.a", "libmelissa_trainer*.so"):
        found = sorted(p for p in lib_dir.rglob(pattern) if "fortran" not in p.name)
        if found:
            return found[0]
    raise RuntimeError(f"the CMake build of {SOURCES} made no libmelissa_trainer in {lib_dir}")


def compile_program(name: str, directory: Path, link: Sequence[str] = ()) -> Path:
    """Compile `name`.c of this directory into `directory/name` against libzmq (and the
    extra `link` arguments: the library); its path."""
    cc = _compiler()
    directory.mkdir(parents=True, exist_ok=True)
    zmq_cflags, zmq_libs = _zmq_flags(cc, directory)
    out = directory / name
    _checked(
        [cc, *CFLAGS, *zmq_cflags, "-I", str(SOURCES / "include"), str(HERE / f"{name}.c"),
         *link, *zmq_libs, "-pthread", "-o", str(out)],
        f"compiling {name}.c",
    )  # fmt: skip
    return out


def build(directory: Path) -> Programs:
    """Build the library and the programs into `directory` (created; reused if there)."""
    cmake = shutil.which("cmake")
    if not cmake:
        raise MissingTool("cmake not found on PATH")
    if not shutil.which("pkg-config"):
        raise MissingTool("pkg-config not found on PATH (clients/c finds libzmq with it)")
    cc = _compiler()
    directory.mkdir(parents=True, exist_ok=True)
    _zmq_flags(cc, directory)  # a missing libzmq is a MissingTool, not a CMake error
    lib_dir = directory / "lib"
    _checked(
        [cmake, "-S", str(SOURCES), "-B", str(lib_dir), "-DCMAKE_BUILD_TYPE=Release",
         "-DMT_FORTRAN=OFF", f"-DCMAKE_C_COMPILER={cc}"],
        "configuring the C library",
    )  # fmt: skip
    _checked([cmake, "--build", str(lib_dir), "-j", "2"], "building the C library")
    library = _library(lib_dir)
    link = [str(library)]
    if library.suffix == ".so":
        link.append(f"-Wl,-rpath,{library.parent}")
    return Programs(
        drain=compile_program("drain", directory),
        send_bench=compile_program("send_bench", directory, link),
        stream_client=compile_program("stream_client", directory, link),
    )
