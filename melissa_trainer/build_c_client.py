"""Building the compiled clients from the sources the package carries, for users who did
`pip install melissa-trainer` (and where those sources are).

The wheel carries the C client (and its Fortran module) as sources, in
``melissa_trainer/_clients/c``; a source checkout has them in ``clients/c``. Building
them needs cmake, a C compiler and libzmq (>= 4.3, found with pkg-config):

    python -m melissa_trainer.build_c_client --c-source   # prints the source directory
    python -m melissa_trainer.build_c_client --build ~/.local/melissa-trainer-client
        # configures, builds and installs it there, then prints the CMAKE_PREFIX_PATH
        # and PKG_CONFIG_PATH a solver's build needs (find_package(MelissaTrainerClient)
        # or pkg-config melissa-trainer-client)

Imports only the standard library.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["build_c_client", "c_source_dir", "main"]


def c_source_dir() -> Path:
    """The C client's source directory (its CMakeLists.txt is there).

    Raises:
        FileNotFoundError: neither the wheel's copy nor a checkout's is there.
    """
    here = Path(__file__).resolve().parent
    for candidate in (here / "_clients" / "c", here.parent / "clients" / "c"):
        if (candidate / "CMakeLists.txt").is_file():
            return candidate
    raise FileNotFoundError(
        f"the C client's sources are not in {here / '_clients' / 'c'} nor in a checkout "
        f"({here.parent / 'clients' / 'c'}): reinstall melissa-trainer from a wheel or sdist"
    )


def build_c_client(
    prefix: str | Path,
    *,
    build_dir: str | Path | None = None,
    fortran: bool | None = None,
    build_type: str = "Release",
    jobs: int = 2,
) -> Path:
    """Configure, build and install the C client (and the Fortran module if a Fortran
    compiler is found, or as `fortran` says) into `prefix`; returns the prefix.

    Raises:
        FileNotFoundError: cmake is missing, or the sources are.
        subprocess.CalledProcessError: a cmake step failed (its output was shown).
    """
    cmake = shutil.which("cmake")
    if cmake is None:
        raise FileNotFoundError("cmake is not on PATH: install cmake (>= 3.18) first")
    source = c_source_dir()
    prefix = Path(prefix).expanduser().resolve()
    with tempfile.TemporaryDirectory(prefix="melissa-c-client-") as tmp:
        build = Path(build_dir) if build_dir is not None else Path(tmp)
        configure = [
            cmake,
            "-S",
            str(source),
            "-B",
            str(build),
            f"-DCMAKE_BUILD_TYPE={build_type}",
            f"-DCMAKE_INSTALL_PREFIX={prefix}",
            "-DCMAKE_INSTALL_LIBDIR=lib",
        ]
        if fortran is not None:
            configure.append(f"-DMT_FORTRAN={'ON' if fortran else 'OFF'}")
        subprocess.run(configure, check=True)
        subprocess.run([cmake, "--build", str(build), "--parallel", str(jobs)], check=True)
        subprocess.run([cmake, "--install", str(build)], check=True)
    return prefix


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m melissa_trainer.build_c_client",
        description="The C (and Fortran) client of melissa-trainer: where its sources are, "
        "or build and install it.",
    )
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--c-source", action="store_true", help="print the source directory")
    group.add_argument("--build", metavar="PREFIX", help="build and install into PREFIX")
    parser.add_argument("--build-dir", help="keep the build tree here (default: a temp dir)")
    parser.add_argument(
        "--fortran",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="build the Fortran module (default: if a Fortran compiler is found)",
    )
    parser.add_argument("--jobs", type=int, default=2, help="parallel compile jobs (default 2)")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"argument --jobs: must be at least 1, not {args.jobs}")
    try:
        if args.c_source:
            print(c_source_dir())
            return 0
        prefix = build_c_client(
            args.build, build_dir=args.build_dir, fortran=args.fortran, jobs=args.jobs
        )
    except (FileNotFoundError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"installed into {prefix}; to build a solver against it:")
    print(f"export CMAKE_PREFIX_PATH={prefix}${{CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}}")
    pkgconfig = prefix / "lib" / "pkgconfig"
    print(f"export PKG_CONFIG_PATH={pkgconfig}${{PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}}")
    lib = prefix / "lib"
    print(
        "CMake's find_package(MelissaTrainerClient) records the library's path in the "
        "binaries it links; with pkg-config, add -Wl,-rpath," + str(lib) + " (or set "
        "LD_LIBRARY_PATH) so that they find libmelissa_trainer_client.so at run time."
    )
    if (prefix / "include" / "fortran").is_dir():
        print(
            f"Fortran by hand: -I{prefix / 'include' / 'fortran'} -L{lib} "
            f"-lmelissa_trainer_fortran -lmelissa_trainer_client -Wl,-rpath,{lib}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
