"""The output directory's making, and the errors of a lock that cannot be taken there
(`output_lock`'s): each names `output_dir` and the way on."""

from __future__ import annotations

from pathlib import Path

__all__ = ["ENV_OUTPUT_LOCK", "make_output_dir", "unsupported", "unwritable"]

#: ``off`` runs without the lock (file systems that refuse locks)
ENV_OUTPUT_LOCK = "MELISSA_TRAINER_OUTPUT_LOCK"


def make_output_dir(output_dir: str) -> None:
    """Create `output_dir` and its missing parents (nothing when it exists).

    Raises:
        OSError: it cannot be made (a read-only file system, no permission to write
            its parent): `exc`'s errno, naming `output_dir` and the way on, instead of
            the bare ``[Errno 30] Read-only file system: 'PATH'`` of ``mkdir``.
    """
    try:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"cannot create output_dir {output_dir!r} ({exc.strerror}"
            f"{'' if exc.filename in (None, output_dir) else f': {exc.filename}'}): a run "
            "writes its lock, checkpoints and logs there. Give an --output_dir on a file "
            "system this run can write to (and, to resume from a checkpoint of a folder it "
            "cannot write to, --resume_from_checkpoint PATH of that checkpoint)",
        ) from exc


def unsupported(output_dir: str, exc: OSError) -> OSError:
    """The error of a file system that refuses locks: `exc`'s errno, and the way on."""
    return OSError(
        exc.errno,
        f"cannot lock output_dir {output_dir!r} ({exc.strerror}): its file system refuses "
        f"file locks (Lustre without '-o flock'?). Use an output_dir on a file system with "
        f"locks, or set {ENV_OUTPUT_LOCK}=off to run without the lock (nothing then stops "
        f"a second trainer from using this directory)",
    )


def unwritable(output_dir: str, path: Path, exc: OSError) -> OSError:
    """The error of a lock file that cannot be made: `exc`'s errno, and the way on."""
    return OSError(
        exc.errno,
        f"cannot write the lock {str(path)!r} in output_dir {output_dir!r} "
        f"({exc.strerror}): a run writes its lock, checkpoints and logs there. To resume "
        "from a checkpoint of a folder this run cannot write to (a read-only copy), give "
        "another --output_dir and --resume_from_checkpoint PATH of that checkpoint",
    )
