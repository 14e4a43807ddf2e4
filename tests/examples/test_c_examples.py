"""The compiled-solver examples (examples/heat_c) and the Fortran module, end to end.

The C client is built and installed once (CMake, with its Fortran modules), the
examples are built against the installed package (find_package), and real MPI jobs
(2 ranks, the launcher's mpiexec backend) stream into a real `Study`. Checked: every
(simulation, time step) arrives exactly once, the decomposed field is reassembled bit
for bit equal to `reference.py` (the same scheme in numpy), a C simulation killed
mid-run is restarted and its re-sent steps are deduplicated, the Fortran module maps
column-major arrays and reports errors as documented, and `train.py` trains.

The library is `compiled.c_client`'s (built once per session). Skips (with the
reason) without cmake, a C compiler, libzmq (pkg-config), the tests' mpiexec and its
mpicc; the Fortran tests also without gfortran and an MPI Fortran (mpi_f08).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from compiled import CClient, c_client, find_mpicc  # noqa: F401 (c_client: a fixture)
from helpers import NO_MPI, find_mpiexec, read_source, running
from process_tree import run_group
from tooling import missing_tool

from melissa_trainer import ReceiverConfig, StreamSource, Study
from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.launcher import Launcher, LauncherTuning
from melissa_trainer.launcher.backends.mpiexec import MpiexecBackend

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "heat_c"


def _load_reference() -> ModuleType:
    """examples/heat_c/reference.py, under a name of its own (no sys.path change)."""
    spec = importlib.util.spec_from_file_location("heat_c_reference", EXAMPLE / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


reference = _load_reference()
PARAMETER_NAMES, solve = reference.PARAMETER_NAMES, reference.solve

#: xdist_group: under pytest-xdist this module's tests run on one worker (pyproject's --dist
#: loadgroup), which builds the examples (the module-scoped `built`) once
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("c_examples"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs Linux"),
    pytest.mark.e2e,
]

NX, NY, STEPS = 7, 5, 12  # NY odd: the two ranks own 3 and 2 rows (uneven parts)
PARAMETERS = [
    dict(zip(PARAMETER_NAMES, values, strict=True))
    for values in ((300.0, 100.0, 500.0, 200.0, 400.0), (150.0, 450.0, 250.0, 350.0, 120.0))
]


def mpiexec() -> str:
    """The tests' mpiexec (the mpich wheel's: its mpicc builds heat_c); skips without."""
    found = find_mpiexec()
    if found is None:
        missing_tool(NO_MPI)
    return found


@dataclass(frozen=True)
class Built:
    prefix: Path  # where the C client (and its Fortran modules) are installed
    bin: Path  # the examples' build directory

    def solver(self, language: str) -> Path:
        path = self.bin / ("heat_c" if language == "c" else "heat_fortran")
        if not path.exists():
            missing_tool("heat_fortran was not built: needs gfortran and an MPI Fortran (mpi_f08)")
        return path


def run(cmd: list[str], cwd: Path | None = None, timeout: float = 240) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"


@pytest.fixture(scope="module")
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Built:
    """The examples built against the installed client (its CMake package), heat_c with
    the MPI C compiler of the tests' mpiexec."""
    client: CClient = request.getfixturevalue("c_client")
    mpiexec()
    mpicc = find_mpicc()
    if mpicc is None:
        missing_tool("needs mpicc next to mpiexec (pip install mpich)")
    examples = tmp_path_factory.mktemp("heat_c")
    run(["cmake", "-S", str(EXAMPLE), "-B", str(examples), f"-DCMAKE_PREFIX_PATH={client.prefix}",
         f"-DMPI_C_COMPILER={mpicc}", "-DCMAKE_BUILD_TYPE=Release"])  # fmt: skip
    run(["cmake", "--build", str(examples), "--parallel", "2"])
    return Built(client.prefix, examples)


def run_study(
    tmp_path: Path, solver: Path, env: dict[str, str] | None = None
) -> tuple[list[dict[str, np.ndarray]], dict[str, float], dict[str, float]]:
    """Both parameter sets run as 2-rank MPI jobs into a Study: its samples, the
    stream's telemetry at the end of the stream, and the launcher's summary once
    stopped (the jobs' ends recorded)."""
    launcher = Launcher(
        simulation=[str(solver), str(NX), str(NY), str(STEPS)],
        sampler=PARAMETERS,
        n_simulations=len(PARAMETERS),
        job_limit=2,
        backend=MpiexecBackend(mpiexec=mpiexec()),
        ranks_per_simulation=2,
        env=env,
        tuning=LauncherTuning(simulation_timeout=60),
    )
    fields = {"temperature": ((NY, NX), "float32")}
    study = Study(launcher, StreamSource(ReceiverConfig(fields=fields)))
    buffer = FIFOBuffer(256)
    study.configure(str(tmp_path / "out"))
    study.start(buffer, 0, 1)
    try:
        study.on_all_ranks_started()
        samples = read_source(study, buffer)
        figures = study.stream.telemetry()
    finally:
        study.stop()
    return samples, figures, launcher.summary()


def check_samples(samples: list[dict[str, np.ndarray]]) -> None:
    """Every (simulation, step) once, each field bit for bit the numpy reference's."""
    keys = sorted((int(s["simulation_id"]), int(s["time_step"])) for s in samples)
    assert keys == [(i, t) for i in range(len(PARAMETERS)) for t in range(STEPS)]
    reference = {i: list(solve(p, NX, NY, STEPS)) for i, p in enumerate(PARAMETERS)}
    for sample in samples:
        sim, step = int(sample["simulation_id"]), int(sample["time_step"])
        field = sample["temperature"]
        assert field.dtype == np.float32 and field.shape == (NY, NX)
        expected = reference[sim][step]
        # bit for bit: the same float32 bits, not merely close values
        assert np.array_equal(field.view(np.uint32), expected.view(np.uint32)), (sim, step)
        values = [PARAMETERS[sim][name] for name in PARAMETER_NAMES]
        np.testing.assert_array_equal(sample["parameters"], values)  # the launcher's, in order


@pytest.mark.timeout(120)
@pytest.mark.parametrize("language", ["c", "fortran"])
def test_mpi_solvers_stream_every_step_once_bit_for_bit(
    built: Built, tmp_path: Path, language: str
) -> None:
    samples, figures, study = run_study(tmp_path, built.solver(language))
    check_samples(samples)
    assert study["finished"] == 2 and study["restarts"] == 0, study
    assert figures["duplicates"] == 0 and figures["samples_put"] == 2 * STEPS, figures


@pytest.mark.timeout(120)
def test_a_killed_c_simulation_is_restarted_and_its_resent_steps_dropped(
    built: Built, tmp_path: Path
) -> None:
    """Rank 0 of each simulation SIGKILLs itself after step 5 of its first attempt; the
    launcher restarts it, it asks the receiver which steps it holds and skips them but
    its first (a rerun's first send goes out at once, `client.rerun`: dropped as a
    duplicate), sends the rest, and the receiver keeps each step once."""
    env = {"MELISSA_HEAT_KILL_AT_STEP": "5"}
    samples, figures, study = run_study(tmp_path, built.solver("c"), env)
    check_samples(samples)
    assert study["finished"] == 2 and study["restarts"] == 2, study
    assert figures["duplicates"] > 0, figures  # (the first send, at least) came again, dropped
    logs = sorted((tmp_path / "out" / "study" / "logs").glob("sim-*.log"))
    assert len(logs) == 2, logs


FORTRAN_PROGRAM = """
program shapes
  use, intrinsic :: iso_c_binding
  use melissa_trainer
  implicit none
  type(mt_client_t) :: client
  integer(c_int32_t), target :: a(3, 4), small(5)
  real(c_double) :: wrong(3, 4)
  character(len=16) :: mode
  integer :: i, j, ierr
  do concurrent (i = 1:3, j = 1:4)
    a(i, j) = 10 * i + j
  end do
  small = 0
  wrong = 0
  call get_command_argument(1, mode)
  call mt_create(client)
  call mt_declare_field(client, 'a', MT_INT32, shape(a))
  call mt_set_batching(client, 0_c_int64_t, 0.02_c_double)  ! every send its own DATA
  call mt_set_reuse(client, MT_REUSE_NEXT_SEND)
  call mt_start(client)
  if (mode == 'stop') call mt_send(client, 0, 'a', wrong)  ! no ierr: error stop
  call mt_send(client, 0, 'a', wrong, ierr)
  print '(i0, 1x, a)', ierr, mt_error_message(client)
  call mt_send(client, 0, 'a', small, ierr)
  print '(i0, 1x, a)', ierr, mt_error_message(client)
  call mt_send(client, 0, 'a', a(1:2, :), ierr)
  print '(i0, 1x, a)', ierr, mt_error_message(client)
  call mt_send(client, 0_c_int64_t, 'a', a, ierr)
  print '(i0)', ierr
  call mt_close(client, ierr)
  print '(i0)', ierr
end program
"""


def compile_fortran(prefix: Path, source: str, out: Path, compiler: str = "gfortran") -> Path:
    """`source` compiled against the module installed in `prefix` (skips without
    `compiler`, or if the library was built without its Fortran modules)."""
    if shutil.which(compiler) is None:
        missing_tool(f"needs {compiler}")
    modules, lib = prefix / "include" / "fortran", prefix / "lib"
    if not (modules / "melissa_trainer.mod").exists():
        missing_tool("the Fortran module was not built (MT_FORTRAN off: no Fortran compiler)")
    (out / "prog.f90").write_text(source)
    libraries = ["-lmelissa_trainer_fortran", "-lmelissa_trainer_client"]
    if "melissa_trainer_mpi" in source:
        if not (modules / "melissa_trainer_mpi.mod").exists():
            missing_tool("melissa_trainer_mpi was not built: no MPI Fortran with mpi_f08")
        libraries.insert(0, "-lmelissa_trainer_fortran_mpi")
    binary = out / "prog"
    run([compiler, "-std=f2018", "-Wall", "-Werror", f"-I{modules}", str(out / "prog.f90"),
         "-o", str(binary), f"-L{lib}", *libraries, f"-Wl,-rpath,{lib}"])  # fmt: skip
    return binary


@pytest.fixture
def fortran_shapes(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """FORTRAN_PROGRAM, built (needs no MPI)."""
    client: CClient = request.getfixturevalue("c_client")
    return compile_fortran(client.prefix, FORTRAN_PROGRAM, tmp_path)


def run_against_receiver(
    binary: Path, args: list[str], fields: dict
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, np.ndarray]]]:
    """Run `binary` as simulation 0 of a one-simulation stream; its output and samples."""
    buffer = FIFOBuffer(64)
    with running(buffer, expected_simulations=1, fields=fields) as receiver:
        env = {**os.environ, "MELISSA_TRAINER_SIMULATION_ID": "0",
               "MELISSA_TRAINER_ENDPOINTS": str(receiver.endpoint)}  # fmt: skip
        proc = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, timeout=60, env=env
        )
        samples = buffer.get_batch(1, timeout=30) if proc.returncode == 0 else []
    return proc, samples


@pytest.mark.timeout(90)
def test_fortran_arrays_arrive_in_c_order_and_errors_name_the_field(
    fortran_shapes: Path,
) -> None:
    """a(nx, ny) arrives as the (ny, nx) array with a(i, j) at [j-1, i-1]; a wrong
    dtype, a wrong size and a non-contiguous section are refused with their message."""
    proc, samples = run_against_receiver(fortran_shapes, [], {"a": ((4, 3), "int32")})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == (
        "3 field 'a' is declared int32, mt_send was given float64 (convert the data to int32, "
        "dtype MT_INT32)"
    ), lines
    # the size given and the declared shape, in C order (the Fortran shape reversed)
    assert lines[1].startswith("4 field 'a': ") and "5 elements" in lines[1], lines
    assert "(4, 3)" in lines[1], lines
    assert lines[2].startswith("1 field 'a': mt_send needs a contiguous array"), lines
    assert lines[3:] == ["0", "0"], lines
    (sample,) = samples
    assert sample["a"].shape == (4, 3) and sample["a"].dtype == np.int32
    for i in range(1, 4):
        for j in range(1, 5):
            assert sample["a"][j - 1, i - 1] == 10 * i + j


@pytest.mark.timeout(60)
def test_a_fortran_error_without_ierr_stops_with_the_message(fortran_shapes: Path) -> None:
    proc, _ = run_against_receiver(fortran_shapes, ["stop"], {"a": ((4, 3), "int32")})
    assert proc.returncode == 3, proc.stdout + proc.stderr  # error stop MT_EDTYPE
    assert (
        "melissa_trainer: mt_send: field 'a' is declared int32, mt_send was given float64"
        in proc.stderr
    )


FORTRAN_MPI_PROGRAM = """
program parts
  use, intrinsic :: iso_c_binding
  use mpi_f08
  use melissa_trainer
  use melissa_trainer_mpi
  implicit none
  type(mt_client_t) :: client
  integer :: rank, ierr
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call mt_create(client)
  call mt_set_endpoints(client, 'tcp://127.0.0.1:9')
  call mt_declare_field(client, 'u', MT_FLOAT64, [4, 3])
  call mt_declare_part_count(client, 'u', 5_c_int64_t)  ! 2 x 5 = 10, not 12
  call mt_start_mpi(client, MPI_COMM_WORLD%MPI_VAL, ierr)  ! the integer handle
  print '(i0, 1x, i0, 1x, a)', rank, ierr, mt_error_message(client)
  call mt_abort(client)
  call MPI_Finalize()
end program
"""


@pytest.mark.timeout(60)
def test_fortran_mpi_start_refuses_parts_that_do_not_add_up_on_every_rank(
    built: Built, tmp_path: Path
) -> None:
    binary = compile_fortran(built.prefix, FORTRAN_MPI_PROGRAM, tmp_path, compiler="mpif90")
    proc = subprocess.run(
        [mpiexec(), "-n", "2", str(binary)],
        capture_output=True, text=True, timeout=50,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    message = "the ranks' parts do not add up to the global fields: 'u' has 10 elements, "
    message += "expected 12 (has: the sum of the ranks' mt_declare_part_count; expected: the "
    message += "size of the global shape given mt_declare_field): fix the counts, or the shape"
    assert sorted(proc.stdout.splitlines()) == [f"0 11 {message}", f"1 11 {message}"]


@pytest.mark.timeout(60)
def test_the_cpp_example_streams_through_the_c_header(built: Built) -> None:
    proc, _ = run_against_receiver(built.bin / "hello_cpp", [], {"greeting": ((2, 3), "float64")})
    assert proc.returncode == 0 and "sent 3 steps" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.timeout(300)  # a hang guard: ~20 s alone, >140 s beside another xdist worker
def test_train_py_trains_on_the_c_solver(built: Built, tmp_path: Path) -> None:
    """The README's command, tiny: the surrogate beats predicting the mean field."""
    sims, steps = 32, 30
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE / "train.py"), "--build_dir", str(built.bin),
           "--mpiexec", mpiexec(), "--num_simulations", str(sims),
           "--time_steps", str(steps), "--nx", "8", "--ny", "6", "--hidden", "64",
           "--learning_rate", "3e-3", "--buffer_size", "1000", "--watermark", "60",
           "--batch_size", "16", "--sample_to_insert_ratio", "40", "--eval_steps", "none",
           "--logging_steps", "100", "--num_validation", "2", "--disable_progress_bar",
           "--json", "--output_dir", str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=280, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert summary["samples_received"] == sims * steps  # each (simulation, step) once
    assert summary["study"]["finished"] == sims and summary["study"]["restarts"] == 0
    assert summary["val_mse"] < 0.5 * summary["mean_field_mse"]


@pytest.mark.timeout(420)
def test_train_py_runs_the_study_once_per_seed(built: Built, tmp_path: Path) -> None:
    """``--seeds 2``, as in the Python examples (`study_common.run_seeds`): two whole
    studies, seeds 5 and 6, each in OUTPUT_DIR/seed-S with its own seed, and their
    spread printed. heat_c has no ``--plot`` to turn off: before `run_seeds` asked which
    examples have one, every seed's run was refused its ``--no_plot`` (so the example
    refused ``--seeds``). Tiny: 4 simulations of 6 steps on a 4 x 4 grid."""
    out = tmp_path / "out"
    cmd = [sys.executable, str(EXAMPLE / "train.py"), "--build_dir", str(built.bin),
           "--mpiexec", mpiexec(), "--num_simulations", "4", "--time_steps", "6",
           "--nx", "4", "--ny", "4", "--hidden", "8", "--buffer", "fifo",
           "--buffer_size", "100", "--watermark", "8", "--batch_size", "4",
           "--eval_steps", "none", "--num_validation", "1", "--disable_progress_bar",
           "--seed", "5", "--seeds", "2", "--json", "--output_dir", str(out)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = run_group(cmd, timeout=400, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])  # the last line: the report
    assert [run["seed"] for run in report["seeds"]] == [5, 6]
    for run in report["seeds"]:  # each seed's own study, in its own directory
        args = next((out / f"seed-{run['seed']}" / "checkpoints").glob(
            "checkpoint-*/training_args.json"))  # fmt: skip
        assert json.loads(args.read_text())["seed"] == run["seed"]
        assert run["val_mse"] > 0
    values = [run["val_mse"] for run in report["seeds"]]
    assert report["min"] == min(values) and report["max"] == max(values)
    assert "val_mse over 2 seeds (5..6)" in proc.stdout
    assert not (out / "checkpoints").exists()  # no run of its own beside the seeds'


FORTRAN_ONLY_PROJECT = """cmake_minimum_required(VERSION 3.18)
project(fortran_only Fortran)
find_package(MelissaTrainerClient REQUIRED)
add_executable(prog prog.f90)
target_link_libraries(prog PRIVATE MelissaTrainer::fortran)
"""


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_fortran_only_cmake_project_finds_and_links_the_package(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """`project(x Fortran)`: the package's Threads dependency must not need C (FindThreads
    does: it failed with "FindThreads only works if either C or CXX language is enabled")."""
    if shutil.which("gfortran") is None:
        missing_tool("needs gfortran")
    client: CClient = request.getfixturevalue("c_client")
    if not (client.prefix / "include" / "fortran" / "melissa_trainer.mod").exists():
        missing_tool("the Fortran module was not built (MT_FORTRAN off: no Fortran compiler)")
    (tmp_path / "CMakeLists.txt").write_text(FORTRAN_ONLY_PROJECT)
    (tmp_path / "prog.f90").write_text(
        "program prog\n  use melissa_trainer\n  print '(a)', mt_version()\nend program\n"
    )
    run(["cmake", "-S", str(tmp_path), "-B", str(tmp_path / "build"),
         f"-DCMAKE_PREFIX_PATH={client.prefix}"])  # fmt: skip
    run(["cmake", "--build", str(tmp_path / "build")])
    out = subprocess.run(
        [str(tmp_path / "build" / "prog")], capture_output=True, text=True, timeout=30
    )
    assert out.returncode == 0 and out.stdout.strip() == "0.1.0", out.stdout + out.stderr
