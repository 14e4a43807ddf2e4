"""Rendezvous directories with a rank file out of bounds (a corrupt or hand-edited
``world_size`` of 10**12, a rank that is not its name's), and each client's words on
them, read by a process of bounded memory and time: before the bounds, both clients
enumerated (Python) or allocated and listed (C) every rank up to a file's world_size,
and ran out of memory or looped for ever (tests/stream/test_rendezvous_bounds.py,
tests/c/test_c_rendezvous_bounds.py). The expected words are written out here, the
oracle: not computed by the code under test."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the address space a reader may use: an order above what either needs, far below what
#: enumerating 10**9 ranks takes (a Python list of them: 8 GB at least)
MEMORY = 2 << 30
ENDPOINT = "tcp://127.0.0.1:5001"

#: (file name, its "rank" and "world_size" as JSON text) -> the words of its refusal
REFUSED = {
    ("rank_0.json", "0", "1000000000000"): (
        "its world_size 1000000000000 is over 1000000000: no trainer has so many ranks"
    ),
    ("rank_0.json", "0", "0"): (
        "its world_size 0 is not a number of ranks: a whole number 1 to 1000000000"
    ),
    ("rank_0.json", "0", '"2"'): (
        "its world_size '2' is not a number of ranks: a whole number 1 to 1000000000"
    ),
    ("rank_0.json", "0", "true"): (
        "its world_size True is not a number of ranks: a whole number 1 to 1000000000"
    ),
    ("rank_1.json", "1e300", "2"): "its rank 1e+300 is not the rank of its name, 1",
    ("rank_1.json", "true", "2"): "its rank True is not the rank of its name, 1",
    ("rank_5.json", "5", "3"): "its rank 5 is not under its world_size 3",
}


def write_file(rv: Path, name: str, rank: str, world: str) -> None:
    """`rv`/`name` holding `rank` and `world` (JSON texts) and a valid rest."""
    rv.mkdir(parents=True, exist_ok=True)
    rest = json.dumps({"version": 1, "endpoint": ENDPOINT})[1:]
    (rv / name).write_text(f'{{"rank": {rank}, "world_size": {world}, {rest}')


def bounded() -> None:
    """(preexec_fn) `MEMORY` of address space at most, unless the C client is built with
    sanitizers (MT_TEST_SANITIZE: AddressSanitizer reserves terabytes of it)."""
    if os.environ.get("MT_TEST_SANITIZE", "").strip() in ("", "0"):
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def python_words(rv: Path, timeout: float) -> str:
    """The Python client's start's error on `rv` (`fetch_rendezvous`, `alive_only`,
    rendezvous timeout `timeout`), read in a process of bounded memory, within 60 s."""
    code = (
        "import sys\nfrom melissa_trainer.stream.endpoints import fetch_rendezvous\n"
        "try:\n    fetch_rendezvous(sys.argv[1], float(sys.argv[2]), alive_only=True)\n"
        "except TimeoutError as exc:\n    print(exc)\n"
    )
    env: dict[str, Any] = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(rv), str(timeout)],
        capture_output=True, text=True, timeout=60, env=env, preexec_fn=bounded, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout, proc.stderr[-2000:]
    return proc.stdout.rstrip("\n")
