"""A refusal of rank 0's own code alone, while rank 1 trains on (``accelerate launch
--num_processes 2``, gloo on CPU): rank 1, held in a collective that rank 0 never joins,
reads rank 0's mark from its wait watch's thread and tells rank 0, which then exits
without waiting out `refusal_mark.READ_WAIT` (15 s) for a read that would never come.

Before, only a rank that refused read the mark (`refusals.refusals_end_the_program`): a
rank held in the trainer's collective never did, and rank 0 exited `READ_WAIT` s after
its line, for nothing (its wait is for a rank about to say a refusal of its own, which a
rank held in a collective is not). The oracle is counted, not timed: the reads counted
in the launcher's store when rank 0's wait (`refusal_mark.leave`) returns, recorded by
the script (0 before: the wait was waited out; each rank's wait in seconds is recorded
too, for the report, and not asserted).

Rank 1 then ends with status 2 and no traceback as its collective fails on rank 0's
exit (`refusal_mark.read_while_held`). Before, it printed gloo's "Connection closed by
peer" traceback and exited 1; on a loaded machine that exit reached torchrun before rank
0's, which named rank 1 the root cause and SIGTERMed rank 0 (a CI run: no exit status 2
in the output at all).

Mid-training (`test_..._held_in_its_backward_...`): rank 0's own code refuses inside
train() (its process_sample, as a check of the script's would) while rank 1 runs its
steps, held in DDP's backward all-reduce, which no wait watches. Before, its watch told
the roll call nothing there: 0 reads, rank 0 waited 15.0 s, and rank 1 hung in the
all-reduce as long (measured: 15.01 s, rank 1's train() ending 15.4 s after rank 0's
refusal, closed by rank 0's exit)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from two_ranks import launch_two_ranks

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

#: a user's script: both ranks build the trainer; rank 0's own check then refuses (a
#: ConfigError of the script's), while rank 1 goes on into train() and its collectives
SCRIPT = """\
import json, os, sys, time
from pathlib import Path
import numpy as np
import torch
from melissa_trainer import ConfigError, OnlineTrainer, TrainingArguments, refusals_end_the_program
from melissa_trainer.trainer import refusal_mark

out = Path(sys.argv[1])
rank = int(os.environ["RANK"])
leave = refusal_mark.leave


def leave_and_count(line):
    began = time.monotonic()
    leave(line)
    waited = time.monotonic() - began
    link = refusal_mark.launch_store()
    run, restart = os.environ["TORCHELASTIC_RUN_ID"], os.environ["TORCHELASTIC_RESTART_COUNT"]
    key = f"melissa_trainer/refused/{run}/{restart}/read"
    with link:
        reads = int(link.store.add(key, 0))
    (out.parent / "leave.json").write_text(json.dumps({"reads": reads, "waited": waited}))


refusal_mark.leave = leave_and_count


def samples(rank, world):
    rng = np.random.default_rng(rank)
    for _ in range(10_000):
        x = rng.standard_normal(4).astype("float32")
        yield {"x": x, "y": x[:2].copy()}


def xy(s):
    return torch.as_tensor(s["x"]), torch.as_tensor(s["y"])


seen = 0


def xy_or_refuse(s):
    global seen
    seen += 1
    if rank == 0 and seen == 400 and MID:  # (a hundred steps in: rank 1 is in its steps)
        raise ConfigError(["my_check=-1 must be positive", "give --my_check 1"])
    return xy(s)


MID = sys.argv[2:] == ["mid"]
with refusals_end_the_program():
    model = torch.nn.Linear(4, 2)
    args = TrainingArguments(output_dir=str(out), batch_size=4, max_steps=10_000,
                             report_to="none", disable_progress_bar=True)
    trainer = OnlineTrainer(model, args, torch.optim.SGD(model.parameters(), 1e-2),
                            train_source=samples, process_sample=xy_or_refuse)
    if rank == 0 and not MID:
        raise ConfigError(["my_check=-1 must be positive", "give --my_check 1"])
    trainer.train()
"""


def refused_alone(tmp_path: Path, *args: str) -> None:
    """Run SCRIPT with `args`; check rank 0's one line, and that its wait ended on rank
    1's read."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    proc = launch_two_ranks(script, str(tmp_path / "out"), *args, timeout=240)
    output = proc.stdout + proc.stderr
    said = [line for line in output.splitlines() if "error:" in line]
    assert said == ["train.py: error: my_check=-1 must be positive give --my_check 1"], output
    assert proc.returncode != 0 and "exitcode  : 2" in output, output[-3000:]
    # Rank 1 read the mark held in a collective: when that collective fails as rank 0
    # exits, it ends quiet with rank 0's status, not a gloo traceback and exit 1 that
    # torchrun could name the root cause, SIGTERMing rank 0 (a CI run did just that)
    assert "[rank1]: Traceback" not in output, output[-3000:]
    statuses = re.findall(r"exitcode  : (-?\d+)", output)
    assert statuses and set(statuses) <= {"2", "-15"}, (statuses, output[-3000:])
    left = json.loads((tmp_path / "leave.json").read_text())
    print("rank 0's wait for the reads:", left)  # (the figure: -s shows it)
    assert left["reads"] == 1, (left, output[-3000:])


def test_rank_0_refusing_alone_ends_once_the_training_rank_has_read_its_mark(
    tmp_path: Path,
) -> None:
    refused_alone(tmp_path)


def test_a_rank_held_in_its_backward_reads_the_mark_of_rank_0_refusing_mid_training(
    tmp_path: Path,
) -> None:
    refused_alone(tmp_path, "mid")
