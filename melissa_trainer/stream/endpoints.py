"""The rendezvous file: where a receiver can be reached, written (`write_rendezvous`),
marked stopped (`mark_stopped`) and read by clients (`fetch_rendezvous`). The endpoints
and keys it publishes: `receiver_address`."""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from melissa_trainer import wire as protocol
from melissa_trainer.stream import rank_bounds
from melissa_trainer.stream.host_scope import published_scope
from melissa_trainer.stream.rank_bounds import bounds_fault, digits_fault, missing_words
from melissa_trainer.stream.reason_line import as_c_reads, said_code, said_line
from melissa_trainer.stream.receiver_address import is_loopback
from melissa_trainer.stream.trainer_listens import refused_files
from melissa_trainer.stream.trainer_process import gone_words, published_process, trainer_gone

RENDEZVOUS_VERSION = 1
#: seconds `fetch_rendezvous` waits before it tells its `notice` what it waits for (a
#: client says so: a typo in the path would otherwise be silent for the whole timeout)
NOTICE_AFTER = 3.0
_RANK_FILE = re.compile(r"rank_([0-9]+)\.json")


def write_rendezvous(
    directory: str | os.PathLike[str],
    rank: int,
    world_size: int,
    endpoint: str,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``{directory}/rank_{rank}.json`` (created with its parents).

    ``{"version": 1, "rank", "world_size", "endpoint"}``, the receiver's host and who
    can reach a loopback endpoint (`host_scope.published_scope`: a client elsewhere is
    told at once), the writing process (`trainer_process.published_process`: a client
    on this machine does not take the file of a trainer killed since), plus `extra`
    keys (the CURVE server public key, when there is one),
    written to a temporary file then renamed, so that a client never reads it
    half-written. An older file is replaced, and the
    files of ranks ``>= world_size`` are removed: a run on more ranks left them in this
    directory (a resume on fewer ranks), no rank of this run will rewrite them, and
    `fetch_rendezvous` would wait for ever on files that disagree on the world size.
    The ranks below `world_size` that have not written yet keep the old run's files
    meanwhile; their run id tells them apart.
    """
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {"version": RENDEZVOUS_VERSION, "rank": rank, "world_size": world_size}
    info.update(endpoint=endpoint, **published_scope(), **published_process(), **(extra or {}))
    fd, tmp = tempfile.mkstemp(prefix=f".rank_{rank}.", suffix=".tmp", dir=path)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(info, f)
        final = path / f"rank_{rank}.json"
        os.replace(tmp, final)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    for other in path.iterdir():
        match = _RANK_FILE.fullmatch(other.name)
        if match is not None and int(match.group(1)) >= world_size:
            other.unlink(missing_ok=True)  # (every rank may remove it: the first one does)
    return final


def mark_stopped(
    directory: str | os.PathLike[str],
    rank: int,
    endpoint: str,
    record: dict[str, Any] | None = None,
) -> None:
    """Mark ``{directory}/rank_{rank}.json`` as its trainer's stopped (``"stopped": true``,
    rewritten aside and renamed), if it still names `endpoint` (a newer trainer's file
    is left alone). `fetch_rendezvous` takes a directory holding a stopped file as not
    ready: a client started while the trainer is down waits for the next one (a trainer
    resumed from its checkpoint rewrites the files) rather than dial an endpoint nobody
    listens on. `record` (`stop_record.build_record`: the receipts the receiver would
    have given, and why it stopped) is written in the same rename, under
    ``"stop_record"``: a client never sees the file stopped without it. Never raises: a
    file it cannot read or write is left as it is, and said at WARNING with the error
    (its clients then take the trainer for alive, or closing, for dead); a missing file
    (nothing to mark: no client finds this endpoint) is not said."""
    path = Path(directory) / f"rank_{rank}.json"
    try:
        info = json.loads(path.read_text())
        if not isinstance(info, dict) or info.get("endpoint") != endpoint:
            return
        info["stopped"] = True
        if record is not None:
            info["stop_record"] = record
        fd, tmp = tempfile.mkstemp(prefix=f".rank_{rank}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(info, f)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except FileNotFoundError:
        return
    except (OSError, ValueError) as exc:
        import logging  # (here: a client's import stays light, without logging)

        logging.getLogger(__name__).warning(
            "could not mark %s stopped (%s): a client reading it takes this trainer for "
            "alive, and a closing one for dead, without the stop record",
            path,
            exc,
        )


def stamp(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    """The inode and modification time of `path` (None if it cannot be read): what a
    client compares to notice a rendezvous rewritten (a file replaced by a rename, a
    directory whose files changed) without reading it."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def fetch_endpoints(rendezvous_dir: str | os.PathLike[str], timeout: float = 60.0) -> list[str]:
    """The receiver endpoints published in a rendezvous directory, in rank order
    (`fetch_rendezvous`'s endpoints).

    Raises:
        TimeoutError: as `fetch_rendezvous`.
    """
    return [entry["endpoint"] for entry in fetch_rendezvous(rendezvous_dir, timeout)]


def fetch_rendezvous(
    rendezvous_dir: str | os.PathLike[str],
    timeout: float = 60.0,
    notice: Callable[[str], None] | None = None,
    alive_only: bool = False,
) -> list[dict[str, Any]]:
    """The receivers' entries published in a rendezvous directory, in rank order.

    Each training rank's receiver writes `rank_{r}.json`, holding
    `{"version": 1, "rank": r, "world_size": W, "endpoint": "tcp://HOST:PORT"}` and,
    when it uses CURVE, `"curve_public_key"` (the Z85 server key a client must use),
    and under a trainer `"run_id"` (the run's identity), by writing a temporary file
    and renaming it. This waits until all W files are there and agree on W and on the
    run id (files of two runs: one is still rewriting them), and none is marked
    ``"stopped"`` (`mark_stopped`: that trainer is down; the next one rewrites them).
    Each file may also name ``"follow_endpoint"``, the receiver's follow socket
    (`follow_server`). Blocks up to `timeout` seconds; still incomplete after
    `NOTICE_AFTER` of them (with more to wait), calls `notice` once with what is wrong
    (the client warns, naming the path and the wait: `client.config`). `alive_only`
    (a client's start): a file whose trainer process is known gone
    (`trainer_process.trainer_gone`: killed on this machine, the file not marked
    stopped) is not taken either, as a stopped one: waited past, its words said; nor,
    the directory otherwise complete, a file whose process cannot be checked here
    (another machine) whose endpoint refuses the connection
    (`trainer_listens.refused_files`: up to 1 s of dialling per look; a file version
    whose endpoint did not refuse is not dialled again while another refuses, and is
    before the files are taken). What is wrong with each file is said in rank order.

    Raises:
        TimeoutError: the directory is still incomplete (or inconsistent) after
            `timeout` seconds; the message says what was found.
    """
    directory = Path(rendezvous_dir)
    start = time.monotonic()
    deadline = start + timeout
    pause = 0.01
    heard: set[tuple[Any, ...]] = set()  # (the file versions not refused: dialled once)
    while True:
        entries, problem = _read_rendezvous(directory, alive_only, heard)
        if entries is not None:
            return entries
        now = time.monotonic()
        if notice is not None and now - start >= NOTICE_AFTER and now < deadline:
            notice(problem)
            notice = None  # (once)
        if now >= deadline:
            raise TimeoutError(
                f"rendezvous directory {str(directory)!r} incomplete after {timeout} s: "
                f"{problem} (is the trainer running, with this output directory?)"
            )
        time.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, 0.25)


def _read_rendezvous(
    directory: Path, alive_only: bool, heard: set[tuple[Any, ...]] | None = None
) -> tuple[list[dict[str, Any]] | None, str]:
    """The entries if the directory is complete, else None and what is wrong (a file
    of a gone trainer too, with `alive_only`; `heard`: `refused_files`' own)."""
    try:
        names = [p.name for p in directory.iterdir()]
    except FileNotFoundError:
        return None, "the directory does not exist"
    except NotADirectoryError:
        return None, "it is not a directory"
    entries: dict[int, dict[str, Any]] = {}
    problems = []
    gone_ranks = set()  # (their files said gone: not "missing" too, as the C client)
    rank_files = False  # (a file of a rank, taken or not)
    # (each file's words in rank order, then name, as the C client's: not the directory's)
    ranked_names = sorted((int(m.group(1)), n) for n in names if (m := _RANK_FILE.fullmatch(n)))
    for file_rank, name in ranked_names:
        rank_files = True
        if (fault := digits_fault(file_rank)) is not None:
            problems.append(f"{name} invalid ({fault})")
            continue
        try:
            # (bytes no UTF-8 decodes kept, each a surrogate: said where, as C says it)
            text = rank_bounds.file_text(directory / name)
            # (an integer of any length: its bounds said; not JSON, or not an object:
            # said in the C client's words)
            entry = rank_bounds.read_object(text)
            rank = entry["rank"]
            # (its bounds said by name: nothing is ever held per rank of its world_size)
            fault = bounds_fault(rank, entry["world_size"], file_rank)
            ok = fault is None and (  # (a fault said first, as C: not a key missing)
                rank_bounds.is_whole(entry["version"], RENDEZVOUS_VERSION)  # (not true: as C)
                and isinstance(entry["endpoint"], str)
                and entry["endpoint"]
                and _is_key(entry.get("curve_public_key"))
                and _is_run_id(entry.get("run_id"))
                and isinstance(entry.get("follow_endpoint", ""), str)
            )
        except KeyError:  # (a key missing: invalid, quoted as its text, as C)
            problems.append(f"{name} invalid ({text})")
            continue
        except (OSError, ValueError, TypeError) as exc:
            problems.append(f"{name} unreadable ({exc})")
            continue
        if fault is not None or not ok:
            problems.append(f"{name} invalid ({fault or text})")  # (the file's text, as C)
            continue
        if entry.get("stopped") is True:
            problems.append(f"{name}: its trainer {_why_stopped(entry)}")
            continue
        gone = trainer_gone(entry) if alive_only else None
        if gone is not None:  # (killed: as a stopped file, a resumed trainer rewrites it)
            problems.append(f"{name}: {gone_words(gone)}")
            gone_ranks.add(rank)
            continue
        entries[rank] = entry
    sizes = {e["world_size"] for e in entries.values()}
    runs = {str(e.get("run_id")) for e in entries.values()}
    if not entries:
        # (only when there is none: a stopped or unreadable one said why it is not taken,
        # and "no file yet" beside "its trainer ended" read as two contradicting stories;
        # the C client's words too, clients/c/src/rendezvous.c)
        if not rank_files:
            problems.append("no rank_{r}.json file yet")
    elif len(sizes) > 1:
        problems.append(f"files disagree on world_size: {sorted(sizes)}")
    elif len(runs) > 1:
        problems.append(f"files of different runs: run_id {sorted(runs)}")
    else:
        (world,) = sizes
        if (missing := missing_words(world, entries.keys() | gone_ranks)) is not None:
            problems.append(missing)
        elif not problems:
            ranked = [entries[r] for r in range(world)]
            # (elsewhere: each file version not refused is dialled once, `heard`)
            refused = refused_files(ranked, is_loopback, heard) if alive_only else {}
            if not refused:
                return ranked, ""
            problems += [f"rank_{r}.json: {why}" for r, why in refused.items()]
    return None, "; ".join(problems)


def _why_stopped(entry: dict[str, Any]) -> str:
    """Why a stopped file's trainer stopped, as its stop record says (read leniently:
    the words only; `client.stopped` checks a record before it decides anything)."""
    record = entry.get("stop_record")
    reason = record.get("reason") if isinstance(record, dict) else None
    code = reason.get("code") if isinstance(reason, dict) else None
    # (the code as C reads it, up to a NUL: both decide alike; quoted at most 32
    # characters, `said_code`: C cut 32 bytes, Python none)
    code = as_c_reads(code) if isinstance(code, str) else None
    ended = record.get("expected_end") if isinstance(record, dict) else None
    if code == "end" and isinstance(ended, dict):
        return (
            f"ended: the study had its expected_simulations="
            f"{ended.get('expected_simulations')} and needs no more simulations (unless "
            f"a trainer started there again publishes)"
        )
    said = f" ({said_code(code)})" if code is not None else ""
    message = reason.get("message") if isinstance(reason, dict) else None
    if code in ("error", "nonfinite") and isinstance(message, str):
        # (a failure's message says what to fix before resuming; its first line, at most
        # 200 characters: the waiting notice is one line; the C client's the same)
        said = f" ({code}: {said_line(message)})"
    return f"stopped{said} (a trainer resumed from its checkpoint publishes again)"


def _is_run_id(value: Any) -> bool:
    """None (no run id: an older trainer) or a valid run id."""
    if value is None:
        return True
    try:
        protocol.check_run_id(value, "run_id")
    except ValueError:
        return False
    return True


def _is_key(value: Any) -> bool:
    """None (no CURVE) or a 40-character Z85 key."""
    return value is None or (isinstance(value, str) and len(value) == 40)
