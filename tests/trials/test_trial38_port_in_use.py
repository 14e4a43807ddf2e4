"""Severity LOW. User trial htrial38 (two scientists sharing one node and one account).

What the users did: both ran the heat example with the same explicit receiver port
(``--bind tcp://127.0.0.1:5557``, as its ``--help`` suggests for a firewall), at once.

What happened: the second one printed a 30-line traceback (pyzmq's ZMQError, then the
library's OSError) and exited 1; its last line says what to do, but names
``ReceiverConfig(bind=...)``, a class of the example's code, not the ``--bind`` flag the
user gave.

What was expected: as a locked ``output_dir`` (the same situation: another study holds
what this one needs), one line ``train.py: error: ...`` naming the flag, exit status 2
(the quick reference's exit codes: "the study examples' refusals to start").

Fixed: an explicit port taken is `PortInUse` (an OSError), one of the refusals
(`trainer.refusals.REFUSALS`), and its words name the examples' ``--bind``. Failed
before (a traceback, exit 1).
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

HEAT = Path(__file__).parents[2] / "examples" / "heat_pde" / "train.py"


@pytest.mark.e2e
@pytest.mark.timeout(180)
def test_a_port_in_use_is_one_line_naming_the_flag_status_2(tmp_path: Path) -> None:
    with socket.socket() as held:  # another study's receiver, on the port both chose
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        flags = ["--num_simulations", "2", "--time_steps", "5", "--grid_size", "8"]
        flags += ["--num_validation", "4", "--no_plot", "--bind", f"tcp://127.0.0.1:{port}"]
        done = subprocess.run(
            [sys.executable, str(HEAT), *flags, "--output_dir", str(tmp_path / "out")],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=150,
        )
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert said and said[-1].startswith("train.py: error: "), done.stderr[-2000:]
    assert str(port) in said[-1] and "--bind" in said[-1], said[-1]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert done.returncode == 2, done.returncode
