"""The job logs of a study: where each job's output goes, and what a fresh study does
with an earlier run's.

Each job's output (stdout and stderr) goes to ``{log_dir}/sim-{id}.log`` (worker mode:
``worker-{slot}.log``), appended to by its restarts; ``log_dir`` is the `Launcher`'s, or
``{study_dir}/logs``. A study that starts afresh (not resumed) first moves the job logs
an earlier run left there to ``{log_dir}/previous-TIME/`` (`set_aside_earlier_logs`),
so that what a failure report quotes of a log (its last lines, which blame the solver or
the sampler) is this run's. A resumed study appends to its own.
"""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["set_aside_earlier_logs"]


def set_aside_earlier_logs(log_dir: Path) -> Path | None:
    """Move the job logs (``sim-*.log``, ``worker-*.log``) in `log_dir` to a new
    ``previous-YYYYmmddTHHMMSSZ`` folder in it (nothing is deleted), and return it;
    None if there are none. Without it a fresh run's jobs append to an earlier run's
    logs, and a report quoting a log's last lines quotes that run's when the new
    attempt printed nothing (a killed or silent solver): another run's error, blamed on
    this one."""
    earlier = sorted([*log_dir.glob("sim-*.log"), *log_dir.glob("worker-*.log")])
    if not earlier:
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    target, n = log_dir / f"previous-{stamp}", 1
    while target.exists():
        n += 1
        target = log_dir / f"previous-{stamp}-{n}"
    target.mkdir()
    for path in earlier:
        path.rename(target / path.name)
    return target
