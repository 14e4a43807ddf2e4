"""Sources: what fills a rank's buffer while the trainer reads it.

A `Source` owns a producer (the network receiver, or a Python iterable) that puts
samples into the buffer and closes it when no data will ever come again. The reader
(the stream dataset, in the training thread) sees the buffer, and knows one call of the
source: `wait_for(n_samples, timeout)`, made before each read of the buffer and while
it waits for data. How the producer shares the process with training (in that call,
in a thread, or both) is the source's own business; a dead producer surfaces from that
call as `SourceError` instead of a hang. The trainer starts the source and stops it at
the end; everything else a source hears of the run comes through the hooks it gives
the trainer (`Source.hooks`), as events every hook sees.

`IterableSource` (`melissa_trainer.sources.iterable`) is the in-process source: a
Python iterable (or a factory of one per rank) advanced in the training thread.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from melissa_trainer.buffers import Buffer
from melissa_trainer.sources.ingest_transform import IngestTransform

if TYPE_CHECKING:  # types only: the stream (which builds on this module) promises
    # numpy and pyzmq only
    from melissa_trainer.config.arguments import TrainingArguments

#: the file of a checkpoint, under ``rank_R/``, that holds a rank's `Source.state_dict`
STATE_FILE = "source.json"


class SourceError(RuntimeError):
    """The producer of a source failed; the original exception is the `__cause__`."""

    #: what resuming from a checkpoint does after this failure, in words, which the
    #: trainer's line appends ("": nothing to add; a study's: `Study`)
    resume_note: str = ""


class Source(ABC):
    """Fills one rank's buffer. Methods are called from the training thread."""

    #: whether it fills the buffer by blocks of samples (`SampleBlock`, a receiver's):
    #: then the trainer's reservoir is stored by column even when batches are read
    #: sample by sample (an eviction frees no per-sample objects); a source that puts
    #: one sample at a time keeps the plain store, where a put stores a reference
    #: rather than copying into a row (`benchmarks/columnar.py`: 6.8 vs 0.7 us)
    puts_blocks: bool = False

    def note_output_dir(self, output_dir: str) -> None:  # noqa: B027 - optional, no-op
        """Called once by the trainer, first thing (before `final_stop`, its `Accelerator`
        and process group, the output directory's lock), with its `output_dir`: a source
        whose files derive from it (a `Study`'s rendezvous records) knows where they are
        before any set-up can fail, so that `note_start_failed` finds them. Must not
        write there, nor fix anything by it (another trainer may hold it: the trainer is
        refused, and the source may be given to another in another `output_dir`; a later
        call replaces it, `configure` comes once it is locked). No-op by default."""

    def configure(self, output_dir: str) -> None:  # noqa: B027 - optional, no-op
        """Called once by the trainer, once `output_dir` is locked for this run (after
        `note_output_dir`, before `set_run_id`), with its `output_dir` (where a source may
        put files: rendezvous, logs). No-op by default."""

    def set_run_id(self, run_id: str) -> None:  # noqa: B027 - optional, no-op
        """Called once by the trainer, after `configure` and before `start`, with this
        run's identity (16 hex digits, new at each trainer, the same on every rank): a
        source that hears from the outside uses it to refuse what another run sends
        (a `StreamSource`'s receivers publish it and refuse HELLOs of another run).
        No-op by default."""

    def set_ingest_transform(self, transform: IngestTransform) -> None:
        """Apply `transform` to every sample this source puts into the buffer, once,
        before it is put (the trainer's ``ingest_sample`` or ``ingest_block``: see
        `melissa_trainer.sources.ingest_transform`); called once by the trainer, before
        `start`, and only when it was given one.

        The samples that the buffer holds at `start` (restored from a checkpoint) are
        not transformed again. A source applies it where it puts, in the thread that
        puts, and lets an `IngestTransformError` fail the source as any failure of its
        producer does (`SourceError` from `wait_for`).

        Raises:
            ValueError: this source cannot apply one (the default: a source of your own
                applies `transform.sample` or `transform.many` to what it puts).
        """
        raise ValueError(
            f"{type(self).__name__} does not apply an ingest transform (ingest_sample / "
            "ingest_block): override Source.set_ingest_transform to apply it where it puts "
            "samples, or compute the features in process_sample / process_batch"
        )

    @abstractmethod
    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        """Begin filling `buffer`, in the background or through `wait_for` (returns at once).

        `buffer` may already hold restored contents and counters: a resumed source
        continues after what the buffer has already received.
        """

    @abstractmethod
    def wait_for(self, n_samples: int, timeout: float) -> None:
        """Do the producer's work that a read of `n_samples` needs; called by the reader
        (the training thread) only.

        The reader calls it before each read of the buffer with `timeout` 0: a source
        whose producer works in this thread does that work here, between training
        steps, rather than in a thread that competes with training for the GIL, and
        must not wait for input that may not come. After a read the buffer could not
        serve, the reader calls it with `timeout` > 0 (seconds) and reads again once it
        returns: it returns when the buffer may serve `n_samples` (to the source's
        knowledge: the buffer's watermark and rate limiter have the last word), when the
        stream has ended, or after at most about `timeout` seconds, doing the producer's
        work meanwhile if that is how this source ingests (a source whose producer is a
        thread waits for it). A source that ingests in this thread may block for as long
        as its producer takes, whatever `timeout`.

        Raises:
            SourceError: the producer failed (at any call from then on), or, with
                `timeout` > 0, the buffer can neither serve the read nor be filled.
        """

    @abstractmethod
    def stop(self) -> None:
        """Stop the producer and release its resources; idempotent, blocks until done."""

    def note_stop(self, code: str, message: str) -> None:  # noqa: B027 (optional)
        """Why the trainer is about to stop it (called before `stop`): `code` one of
        "end" (the run ended: end of stream, max_steps, a hook), "preempted" (a signal:
        a resumed trainer follows), "error" (training failed); `message` a sentence. A
        source whose producers outlive it may tell them (a `StreamSource` writes it in
        its receivers' stop record, which closing simulations read). Ignored by default."""
        return None

    def note_restarts_resume(self, resumes: bool) -> None:  # noqa: B027 (optional)
        """Whether a restart of this run by its launcher (torchrun's ``--max_restarts``)
        resumes it: the restart runs the same command, which resumes only if it says
        ``resume_from_checkpoint`` (else it is refused over the first attempt's
        checkpoints, or starts afresh as another run). Called by the trainer before
        `start`, and again with False once nothing is left to resume from (`output_dir`
        removed). A `StreamSource`'s stop record of ``error`` promises restarts only when
        True. Ignored by default."""
        return None

    def final_stop(self, output_dir: str) -> str | None:
        """On a torchrun restart, before the trainer's set-up: why the failed attempt's
        stop was final (no restart can resume it: `stream.final_stop`), in one line saying
        what to do; None to go on (not a restart, nothing final). A `StreamSource` reads
        its receivers' stop records (`output_dir`: a study's are under it). None by
        default."""
        return None

    def note_start_failed(self, rank: int, error: BaseException) -> None:  # noqa: B027 (optional)
        """This rank's `train()` failed with `error` before its source published anything
        (its resume, its `start`): a restarted attempt under torchrun that the failed
        run's clients wait for tells them whether another restart follows (a
        `StreamSource` rewrites the failed run's stop record: `stream.restart_failed`).
        Called by the trainer on that failure (not when it was refused `output_dir`,
        whose records are another run's: `starting.setup_failed`); never raises.
        Ignored by default."""
        return None

    def stop_bound(self) -> float:
        """Seconds `stop` may block at most, beyond its commands' moments: the trainer
        ranks' last meeting (`trainer.exit_meeting`) waits that much longer, so that no
        rank leaves it while another's source still stops (a `Study` on rank 0 killing
        its simulations). Asked once per `train()`, as the sources have started: the
        ranks wait the largest of their bounds (`exit_meeting.agree_meet_bound`); an
        override that raises is said at WARNING and counts 0. 0 by default (a source
        that stops at once)."""
        return 0.0

    def hooks(self, args: TrainingArguments) -> list[Any]:
        """The hooks this source needs, which the trainer installs first (called once,
        at its construction, with the run's arguments): how a source hears of the
        trainer's lifecycle (SOURCE_STARTED, END_OF_STREAM, PREEMPTED: `Event`) and
        of what training computes (SIMULATION_LOSSES), as any hook does. A `Study`
        gives one that starts its simulations once every rank's source has started and
        tells it of the end of the stream and of a preemption; an adaptive one also a
        `SimulationLossTracker` and a feed of its statistics to the sampler. None by
        default. Each is a `melissa_trainer.hooks.Hook` (typed `Any`: the hooks are a
        layer above this one; the trainer's `HookList` checks each).

        Raises:
            ValueError: `args` asks for what this source cannot follow.
        """
        return []

    #: Keys of `telemetry()` that are figures of the whole study, which every rank counts
    #: in full (e.g. simulations finished, when each receiver sees every simulation
    #: end): the trainer reduces them over ranks with MAX, not SUM, so that a study of
    #: 16 simulations logs 16 on any number of ranks. Empty by default.
    study_keys: ClassVar[frozenset[str]] = frozenset()

    def telemetry(self) -> dict[str, float]:
        """Cumulative figures for the logs (messages, bytes, rejected…); empty by default.

        The same keys on every rank: the trainer sums them over ranks at each log,
        except `study_keys`, whose maximum over ranks is logged.
        """
        return {}

    def state_dict(self) -> dict[str, Any]:
        """JSON-serializable state saved with this rank's checkpoint (e.g. which
        (simulation, time step) pairs were received); empty by default."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()`; called before `start`."""
        if state:
            raise ValueError(f"{type(self).__name__} has no state but the checkpoint holds some")

    def reshard_state(
        self,
        states: Sequence[dict[str, Any]],
        buffer_puts: Sequence[int],
        rank: int,
        world_size: int,
        buffer_put: int,
    ) -> dict[str, Any]:
        """The state new rank `rank` of `world_size` loads (with `load_state_dict`) when
        a checkpoint of ``len(states)`` ranks resumes on another number of ranks.

        A pure function of its arguments (each new rank calls it on the same files, no
        communication). `states[r]` is old rank r's `state_dict()`, `buffer_puts[r]` its
        buffer's put count (its snapshot's ``put``), `buffer_put` the new rank's once its
        share of the buffers is loaded (`melissa_trainer.buffers.reshard.share`).

        The default: a source without state resumes on any number of ranks (``{}``);
        one with state is refused. A source with per-rank state overrides this to merge
        and re-split it (`StreamSource`, `Study`).

        Raises:
            ValueError: some old rank has state and this source cannot reshard it.
        """
        if any(states):
            raise ValueError(
                f"{type(self).__name__} cannot be resumed on another number of ranks "
                f"({len(states)} -> {world_size}): its checkpoint holds per-rank state "
                "that it does not know how to merge and re-split (override "
                "Source.reshard_state to make it resumable on any number of ranks), "
                f"or resume on {len(states)} ranks"
            )
        return {}
