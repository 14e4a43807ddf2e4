"""What the hooks' `on_save` did to the checkpoint just written (Hugging Face callbacks
write into the checkpoint directory; here it is already renamed into place, its manifest
written): said at the save, not first at a resume days later.

Contract (`trainer.checkpointing.save_checkpoint` does the collective part):

* Right after the commit, before the hooks run, each rank takes the `Stamp` (size,
  mtime, inode: a stat, no read) of the files it wrote, the main rank of the manifest
  too (`Watch`). After the hooks ran, each rank compares (`Watch.spoiled`): a file gone,
  or whose stamp changed and whose bytes no longer hash to its manifest entry (so a hook
  that rewrites a file with the same bytes spoils nothing), spoils the checkpoint: its
  resume would fail the verification. So does, on the main rank, a file not in the
  manifest where the loading reads the trainer's own (`manifest.unexpected`). The
  caller raises `CheckpointError` on every rank, naming the files, the hooks that ran
  and the fix (`describe_spoiled`).
* Any other file a hook added (`Watch.foreign`, main rank) is no error: not the
  trainer's state, it is not verified; the caller warns of it once per run
  (`describe_hook_files`), as the resume does (`errors.describe_foreign`).

Cost: one stat per file of the rank's, twice, and on the main rank one listing of the
checkpoint; a hash only of a file whose stamp changed. A hook that rewrites a file in
place with the same size within the file system's mtime granularity (ext4's clock
tick, a few milliseconds; seconds on some network file systems) after the trainer
wrote it goes unseen here, not at the resume (its hash is checked there).

Pure but for the stats and reads of the checkpoint's files; no collective.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from melissa_trainer.checkpoint import manifest

__all__ = ["Stamp", "Watch", "describe_hook_files", "describe_spoiled"]

#: (size, mtime in ns, inode) of a file; None: it is gone (or cannot be looked at)
Stamp = tuple[int, int, int] | None


def _stamp(path: Path) -> Stamp:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino)


class Watch:
    """The stamps of the files rank `rank` checks in `checkpoint` (those of `entries`,
    every rank's manifest entries, that it wrote; the main rank also the manifest),
    taken when built: build it after the commit, before the hooks' `on_save`."""

    def __init__(
        self, checkpoint: Path, entries: Mapping[str, manifest.Entry], rank: int, main: bool
    ) -> None:
        self.checkpoint = checkpoint
        self.entries = dict(entries)
        self.main = main
        mine = [rel for rel, entry in entries.items() if int(entry["rank"]) == rank]
        self.stamps = {rel: _stamp(checkpoint / rel) for rel in mine}
        if main:
            self.stamps[manifest.MANIFEST] = _stamp(checkpoint / manifest.MANIFEST)

    def spoiled(self) -> list[str]:
        """``"file: what"`` for each file the hooks changed so that the checkpoint no
        longer verifies: this rank's files gone or with other bytes; on the main rank,
        the manifest changed, and files not in it where the trainer's own are."""
        found = []
        for rel, before in self.stamps.items():
            now = _stamp(self.checkpoint / rel)
            if now is None and before is not None:
                found.append(f"{rel}: removed")
            elif now != before and not self._same_bytes(rel):
                found.append(f"{rel}: overwritten")
        if self.main:
            found += [str(p) for p in self._unexpected() if not p.foreign]
        return found

    def foreign(self) -> list[str]:
        """Main rank: the files not in the manifest where the trainer never reads (a
        hook's own artefacts: `manifest.unexpected`'s foreign ones); [] elsewhere."""
        if not self.main:
            return []
        return [p.file for p in self._unexpected() if p.foreign]

    def _unexpected(self) -> list[manifest.Problem]:
        return manifest.unexpected(self.checkpoint, self.entries)

    def _same_bytes(self, rel: str) -> bool:
        """Whether `rel`, whose stamp changed, still holds what the manifest says."""
        try:
            if rel == manifest.MANIFEST:
                return manifest.read(self.checkpoint) == self.entries
            return manifest.hash_file(self.checkpoint / rel)[1] == self.entries[rel][manifest.HASH]
        except (OSError, ValueError):  # unreadable now: it fails the verification too
            return False


def describe_spoiled(path: Path, spoiled: Sequence[str], hooks: Sequence[str]) -> str:
    """The error of a save whose checkpoint `path` the hooks' `on_save` (`hooks`, the
    names of the suspects, in the order they ran: the user's hooks, the built-in ones
    only when no other has an `on_save`) changed: `spoiled` (`Watch.spoiled`, every
    rank's)."""
    return (
        f"checkpoint {path} was changed after its manifest was written, while the hooks' "
        f"on_save ran (in order: {', '.join(hooks)}): {'; '.join(spoiled)}. A resume "
        "would refuse it (it no longer verifies). A hook must not write, replace or "
        "remove the trainer's files in a checkpoint (model.safetensors, optimizer.bin, "
        "rank_*/..., manifest.json): write its own files beside the checkpoint, e.g. "
        "under output_dir/artefacts/checkpoint-STEP, or under a name of its own"
    )


def describe_hook_files(path: Path, files: Sequence[str], hooks: Sequence[str]) -> str:
    """The warning, once per run, of the files the hooks' `on_save` (`hooks`, in order)
    added to checkpoint `path`: not in its manifest, so not verified."""
    return (
        f"the hooks' on_save (in order: {', '.join(hooks)}) wrote files into checkpoint "
        f"{path} that its manifest does not list: {', '.join(files)}. They are not part "
        "of the verified state: a resume leaves them unchecked (and warns of them), and "
        "max_to_keep deletes them with the checkpoint. Write them beside the checkpoint "
        "instead, e.g. under output_dir/artefacts/checkpoint-STEP (said once)"
    )
