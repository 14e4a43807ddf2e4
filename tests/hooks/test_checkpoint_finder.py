"""The newest checkpoint, as the ledger checker (`hooks.lineage_given_up`) finds the
study's record in it and as the trainer resumes from it (`checkpoint.paths`): one
implementation (`common.checkpoint_names`), the same folder on each case. Before, the
hooks layer, below `checkpoint`, globbed ``checkpoint-*`` itself, and a folder named
``checkpoint-²`` (``str.isdigit`` but no ``int``) made the check fail with
``invalid literal for int()`` where the trainer skips it."""

from __future__ import annotations

from pathlib import Path

import pytest

from melissa_trainer.checkpoint import paths
from melissa_trainer.common import checkpoint_names
from melissa_trainer.hooks import lineage_given_up
from melissa_trainer.hooks.lineage_given_up import read_given_up
from melissa_trainer.sources.source import STATE_FILE

#: case -> (the folders and files under OUTPUT_DIR/checkpoints, the one read: None for none)
CASES: dict[str, tuple[list[str], str | None]] = {
    "numbered, by step": (["checkpoint-2", "checkpoint-10", "checkpoint-9"], "checkpoint-10"),
    "one being written": (["checkpoint-4", ".tmp-checkpoint-8"], "checkpoint-4"),
    "one being deleted": ([".deleting-checkpoint-12", "checkpoint-3"], "checkpoint-3"),
    "a file of a checkpoint's name": (["checkpoint-1", "file:checkpoint-20"], "checkpoint-1"),
    "a name of digits int() refuses": (["checkpoint-5", "checkpoint-\u00b2"], "checkpoint-5"),
    "only one being written": ([".tmp-checkpoint-8"], None),
    "none": ([], None),
}  # fmt: skip


def test_one_implementation_of_the_newest_checkpoint() -> None:
    assert lineage_given_up.latest_checkpoint is checkpoint_names.latest_checkpoint
    assert paths.latest_checkpoint is checkpoint_names.latest_checkpoint
    assert paths.list_checkpoints is checkpoint_names.list_checkpoints


@pytest.mark.timeout(30)
@pytest.mark.parametrize("case", list(CASES))
def test_the_ledger_check_reads_the_checkpoint_the_trainer_resumes_from(
    tmp_path: Path, case: str
) -> None:
    made, expected = CASES[case]
    root = tmp_path / "checkpoints"
    root.mkdir()
    for name in made:
        if name.startswith("file:"):
            (root / name[5:]).write_text("")
            continue
        (root / name / "rank_0").mkdir(parents=True)
        # (a record that cannot be read: the error names the file the check read)
        (root / name / "rank_0" / STATE_FILE).write_text('{"launcher": "unreadable"}')
    found = paths.latest_checkpoint(root)
    assert (None if found is None else found.name) == expected
    if expected is None:
        assert read_given_up(tmp_path) is None
        return
    with pytest.raises(ValueError) as error:
        read_given_up(tmp_path)
    assert str(error.value).startswith(f"{root / expected / 'rank_0' / STATE_FILE}: "), error.value
