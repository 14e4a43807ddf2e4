"""`Study`: a launcher's simulations streamed into the trainer, as its `train_source`.

    launcher = Launcher("python heat.py {parameters}", sampler, n_simulations=500, job_limit=8)
    trainer = OnlineTrainer(model, args, optimizer, train_source=Study(launcher))
    # the stream's settings: Study(launcher, StreamSource(ReceiverConfig(bind="tcp://*:*")))

A study composes two parts that know nothing of each other: a `StreamSource` (each
rank's receiver filling its buffer: the data) and a `Launcher` (rank 0's supervisor of
the simulations: the processes). The study owns what joins them:

* **When the simulations start.** Rank 0 starts the launcher in `on_all_ranks_started`,
  which the study's hook (`hooks`) calls at SOURCE_STARTED, fired by the trainer after a
  barrier once every rank's `start` has returned: every receiver has published its
  endpoint, so no simulation reads a rendezvous file left by an earlier run. Outside a
  trainer, call it yourself after `start`.
* **What the study hears of the run** comes through the hooks it gives the trainer
  (`hooks`, `melissa_trainer.study.hooks`): the start above, the end of the stream and
  a preemption (which decide how long `stop` waits) and, with an adaptive sampler, a
  `SimulationLossTracker` whose statistics rank 0 feeds to the launcher's `observe`.
* **What "finished" means.** Rank 0's receiver reports to the launcher (its heartbeat
  is the per-simulation message count of every rank's receiver, the other ranks' handed
  to rank 0: `every_rank`; a simulation is finished once its data
  is complete, not when its process exits 0; a HELLO refused for other fields, or
  non-finite data under ``ReceiverConfig(nonfinite="fail")``, fails that simulation).
  A simulation given up is ABANDONed at every receiver, so that no rank waits for it
  (a redrawn one's replacement is waited for instead).
* **Failure surfaces as `SourceError`** from `wait_for`: the study failed (see
  `Launcher`), every launched simulation has ended and the stream still waits (rank 0,
  after `ENDED_GRACE` s of silence; another rank lacking a simulation rank 0 counts
  finished, once rank 0 has told it the study's end: `end_notice`), or any error of
  the stream, with the study's failures (exit codes, log tails) appended.
* **A silence the launcher explains is not a stall.** The stream's stall watchdog
  (`ReceiverConfig.stall_timeout`) asks the launcher before it fails a silent stream
  (`StreamSource.excuse_silence`): on rank 0, while every job is queued by its
  scheduler or within its start-up allowance (`Launcher.silence_explained`,
  `melissa_trainer.launcher.expected_silence`), the silence is logged once and
  waited for; so a `LauncherTuning(startup_timeout=...)` past `stall_timeout` needs
  no change of `stall_timeout`. The other ranks have no launcher: they excuse a
  silence up to the launcher's numeric start-up allowance (`other_rank_excuse`), past
  which rank 0's launcher has killed a hung solver (they know nothing of a scheduler's
  queue: a queue longer than that still needs `stall_timeout` raised). A silence not
  explained (no job alive, a simulation silent mid-stream, a start-up with no bound)
  fails as before.
* **Stop.** `stop` ends the simulations first (none outlives the trainer; how long the
  last ones get, `STOP_WAIT` s at the end of the stream: `study_stop`), then the receivers.
* **Checkpoint and resume.** The launcher's record rides in rank 0's source state (key
  ``"launcher"`` beside the stream's record). On resume, `on_all_ranks_started` is a
  collective: the ranks gather the simulations their checkpointed receivers all have
  complete; those are finished, and any other that had run runs again (the receivers'
  dedup drops what they already have). What runs twice after a restart: the
  simulations that were running or whose data the checkpoint lacks, nothing else;
  `resume_report` says which (printed by `ProgressHook` after "resumed from").
* **The end-of-run account.** `stop` logs which simulations contributed no sample and
  why, and what an adaptive sampler drew (`launcher.account`): a WARNING when some
  contributed none, or when the losses reached the sampler too late to steer any draw
  (`study.feedback`); otherwise `account_report`, which `ProgressHook` prints.

Without a launcher ("external mode"): `StreamSource(ReceiverConfig(expected_simulations=N))`.

Threading: as `StreamSource`, methods are called from the training thread
(`telemetry` and `state_dict` may be called from any thread).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from melissa_trainer.buffers import Buffer
from melissa_trainer.config.arguments import TrainingArguments
from melissa_trainer.core.loss_per_simulation import SimulationLoss
from melissa_trainer.core.loss_steps import resolve_loss_steps
from melissa_trainer.core.wait_watch import WaitWatch
from melissa_trainer.hooks import Hook, SimulationLossTracker
from melissa_trainer.launcher import Launcher
from melissa_trainer.launcher.account import resume_lines
from melissa_trainer.launcher.adaptive import AdaptiveSampler
from melissa_trainer.launcher.simulation_record import SavedStudy
from melissa_trainer.sources.ingest_transform import IngestTransform
from melissa_trainer.sources.source import Source, SourceError
from melissa_trainer.stream.final_stop import read_final_stop
from melissa_trainer.stream.rank_activity import ActivityPublisher
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.starvation_watch import StarvationWatch
from melissa_trainer.stream.stream_source import StreamSource
from melissa_trainer.study.closing import LastExits, check_waiting
from melissa_trainer.study.end_notice import StudyEndNotice
from melissa_trainer.study.every_rank import EveryRankReport, publisher
from melissa_trainer.study.feedback import FeedbackCheck
from melissa_trainer.study.first_data import FirstDataNotice
from melissa_trainer.study.hooks import AdaptiveFeed, StudyEvents
from melissa_trainer.study.launch import (
    complete_on_every_rank,
    other_rank_excuse,
    receiver_notices,
    warn_unreachable_receivers,
)
from melissa_trainer.study.progress_words import study_failed
from melissa_trainer.study.saved_account import SavedAccount
from melissa_trainer.study.starvation import study_watch
from melissa_trainer.study.study_state import StudyState
from melissa_trainer.study.study_stop import StudyStop
from melissa_trainer.study.watermark import warn_unreachable_study_watermark

__all__ = ["ENDED_GRACE", "Study"]

#: seconds the receiver is idle, every simulation ended, before rank 0 says it waits in vain
ENDED_GRACE = 5.0
#: launcher figures added to the telemetry (rank 0's; zeros elsewhere, so sums are exact)
LAUNCHER_KEYS = ("running", "exited", "finished", "failed", "abandoned", "restarts", "redraws")


class Study(StudyState, StudyStop, Source):
    """Runs `launcher`'s simulations and trains on what they stream (module docstring).

    Args:
        launcher: the simulations: what runs, how many, where, the failure policy. Its
            per-job logs go to ``{output_dir}/study/logs`` unless it says otherwise.
        stream: each rank's receiver (default ``StreamSource()``). `ReceiverConfig`
            fields left None are filled in: `expected_simulations` (`n_simulations`),
            `parameters` (the sampler's names) and `rendezvous_dir`
            (``{output_dir}/rendezvous`` under a trainer; outside one, give it).

    Raises:
        TypeError: `launcher` is not a `Launcher` or `stream` not a `StreamSource`.
        ValueError: `stream`'s `parameters` are the sampler's names in another order.
    """

    puts_blocks = True  # through its `StreamSource`
    study_keys = StreamSource.study_keys

    def __init__(self, launcher: Launcher, stream: StreamSource | None = None) -> None:
        if not isinstance(launcher, Launcher):
            raise TypeError(
                f"Study(launcher, ...) takes a melissa_trainer.Launcher, "
                f"not {type(launcher).__name__}"
            )
        stream = StreamSource() if stream is None else stream
        if not isinstance(stream, StreamSource):
            raise TypeError(
                f"Study(launcher, stream) takes a melissa_trainer.StreamSource as stream, "
                f"not {type(stream).__name__}"
            )
        stream.fill_in(
            expected_simulations=launcher.n_simulations, parameters=launcher.sampler.names
        )
        self.launcher, self.stream = launcher, stream
        stream.first_data = None  # (the study says its own, `self.first_data`)
        self._output_dir: Path | None = None  # (`configure`'s: locked for this run)
        #: the trainer's output_dir as first told (`note_output_dir`), before it is locked:
        #: provisional, for `note_start_failed` alone
        self._noted_dir: Path | None = None
        self._rank, self._world = 0, 1
        self._resumed = False
        self._launcher_state: dict[str, Any] | None = None
        #: rank 0, resumed: the launcher's record as read and checked at load (migrated,
        #: its records built: once), applied when the launcher starts
        self._launcher_saved: SavedStudy | None = None
        self._started = False  # the launcher runs (rank 0 only)
        self._failed = False  # wait_for raised: training stops with an error
        self._preempted = False  # on_preempted: stop need not wait either
        self._stream_over = False  # on_end_of_stream: the last simulations are closing
        self._last_exits = LastExits()  # (at most STOP_WAIT s for them, in all)
        self._end_notice: StudyEndNotice | None = None  # rank 0: tells the ranks the end
        self._publisher: ActivityPublisher | None = None  # (`every_rank`: to rank 0)
        self._ranks: EveryRankReport | None = None  # (rank 0's: its launcher's, its account's)
        self.starvation: StarvationWatch | None = None  # a wait for a batch never served
        #: rank 0, resumed: which simulations are done, which run again (`ProgressHook`)
        self.resume_report: list[str] = []
        self.account_report: list[str] = []  # rank 0, after `stop` (`ProgressHook` prints it)
        self._accounted = False  # the end-of-run account was logged (`stop`)
        self.saved_account = SavedAccount()  # what a resume from the last checkpoint does
        self.feedback = FeedbackCheck()  # rank 0: did the losses steer a draw? (`stop`)
        #: rank 0: says once when training has waited long for the first data
        self.first_data = FirstDataNotice()
        #: the trainer's wait watch (its study hooks set it before `on_all_ranks_started`,
        #: whose gather at a resume it watches; None: unwatched). An attribute, not an
        #: argument: subclasses override ``on_all_ranks_started(self)``
        self.wait_watch: WaitWatch | None = None
        #: whether another rank's process is known ended (`OnlineTrainer.peer_ended`,
        #: set as `wait_watch`; None: none known): rank 0's account stops waiting for its
        #: last counts then (`EveryRankReport.final_words`)
        self.peer_ended: Callable[[int], bool] | None = None

    def note_output_dir(self, output_dir: str) -> None:
        """`Source.note_output_dir`: where a restarted attempt whose set-up fails finds
        the failed run's records (``{output_dir}/rendezvous`` unless the stream names its
        own: `note_start_failed`), before the trainer's set-up. Provisional: the stream's
        rendezvous is not set here (the trainer may be refused `output_dir`, another
        run's folder; a retry of this study then names another), but by `configure`,
        once `output_dir` is locked for this run; a later call replaces it. A rendezvous
        an earlier trainer's `configure` filled in is forgotten here (a study given to a
        second trainer, the first let go untrained: its solvers must look in the second's
        folder, and a failed set-up must not rewrite the first's records); one the
        stream's config named is kept."""
        self._noted_dir = Path(output_dir)
        if self.stream.receiver is None:  # (a started study's is its run's)
            self._output_dir = None  # (locked for this run again by `configure`)
        self.stream.forget_filled("rendezvous_dir")
        self.stream.note_output_dir(output_dir)

    def configure(self, output_dir: str) -> None:
        """`Source.configure`: the stream's rendezvous is ``{output_dir}/rendezvous``
        unless it names its own (the trainer's call, `output_dir` locked; outside a
        trainer, configure alone)."""
        self._output_dir = self._noted_dir = Path(output_dir)
        self.stream.note_output_dir(output_dir)
        self.stream.fill_in(rendezvous_dir=self._output_dir / "rendezvous")
        self.stream.configure(output_dir)

    def note_start_failed(self, rank: int, error: BaseException) -> None:
        """`Source.note_start_failed`: to the receivers, whose failed run's record says
        it: in their rendezvous, or, before `configure`, in the one `note_output_dir`
        noted (a restarted attempt whose set-up failed)."""
        noted = None if self._noted_dir is None else self._noted_dir / "rendezvous"
        self.stream.note_start_failed(rank, error, default_dir=noted)

    def final_stop(self, output_dir: str) -> str | None:
        """`Source.final_stop`: its stream's records, ``{output_dir}/rendezvous`` unless
        the stream names its own (its default is filled in by `configure`, after this)."""
        directory = self.stream.config.rendezvous_dir or Path(output_dir) / "rendezvous"
        stop = read_final_stop(directory)
        return None if stop is None else stop.words()

    def set_run_id(self, run_id: str) -> None:
        """The trainer's run id: the receivers publish it and refuse other runs'
        HELLOs; the launcher passes it to every job (``MELISSA_TRAINER_RUN_ID``), whose
        client refuses a rendezvous of another run."""
        self.stream.set_run_id(run_id)

    def set_ingest_transform(self, transform: IngestTransform) -> None:
        """Each rank's receiver applies `transform` (see `StreamSource.set_ingest_transform`)."""
        self.stream.set_ingest_transform(transform)

    def start(self, buffer: Buffer, rank: int, world_size: int) -> None:
        """Start this rank's receiver (the simulations start in `on_all_ranks_started`).

        Raises:
            ValueError: no `rendezvous_dir` outside an `OnlineTrainer`.
            OSError: the receiver cannot bind its endpoint.
        """
        if self.stream.config.rendezvous_dir is None:
            raise ValueError(
                "a Study needs StreamSource(ReceiverConfig(rendezvous_dir=...)) outside an "
                "OnlineTrainer (the trainer uses {output_dir}/rendezvous)"
            )
        if rank != 0:  # (rank 0's launcher answers for itself: `_start_launcher`)
            self.stream.excuse_silence(other_rank_excuse(self.launcher.tuning))
        else:
            warn_unreachable_receivers(self.launcher.backend, self.stream.config.bind)
        self.stream.start(buffer, rank, world_size)
        self._rank, self._world = rank, world_size
        receiver = self.stream.receiver
        if rank != 0 and receiver is not None and self._publisher is None:
            # (every rank's receiver heard by the launcher: `every_rank`)
            where = Path(self.stream.config.rendezvous_dir)  # (checked above)
            self._publisher = publisher(receiver, where, self.stream.config.run_id, rank)
        config, received = self.stream.config, buffer.stats().put  # (restored: a resume's)
        warn_unreachable_study_watermark(
            self.launcher, config.max_time_step, buffer.watermark, rank, world_size, received
        )
        self.starvation = study_watch(self.launcher, self.stream, buffer, rank, world_size)

    def on_all_ranks_started(self) -> None:
        """Rank 0 starts the simulations (on resume, a collective: every rank calls it,
        its gather watched by `wait_watch`)."""
        receiver = self.stream.receiver
        if self._started:
            return
        if receiver is None:
            raise RuntimeError("Study.on_all_ranks_started() before start()")
        complete = (
            complete_on_every_rank(receiver.completed(), self.wait_watch) if self._resumed else None
        )
        if self._rank == 0:
            self._start_launcher(receiver, complete)

    def _start_launcher(self, receiver: Receiver, complete: set[int] | None) -> None:
        launcher = self.launcher
        if self._launcher_state:
            assert self._launcher_saved is not None  # (read with it, by load_state_dict)
            launcher.resume(self._launcher_saved)  # (not read again)
            launcher.reconcile(complete or set())
            self.resume_report = resume_lines(launcher.outcomes(), launcher.n_simulations)
        assert self.stream.config.rendezvous_dir is not None  # (checked at start)
        rendezvous = Path(self.stream.config.rendezvous_dir)
        abandon, redrawn = receiver_notices(rendezvous)
        receiver.report_refusals_to_launcher()  # (before any simulation runs)
        study_dir = (self._output_dir or rendezvous.parent) / "study"
        self.feedback.started(launcher.sampler, launcher.n_simulations)  # (before any draw)
        run_id = self.stream.config.run_id
        report = self._ranks = EveryRankReport(
            receiver,
            rendezvous,
            run_id,
            self._world,
            lambda k: bool(self.peer_ended and self.peer_ended(k)),
        )
        launcher.start(
            rendezvous,
            heartbeat=report.activity,
            abandon=abandon,
            redrawn=redrawn,
            data=report,
            study_dir=study_dir,
            run_id=self.stream.config.run_id,
        )
        self._end_notice = StudyEndNotice.start(launcher, rendezvous, self.stream.config.run_id)
        self._end_notice.progress.reads = self.starvation.reads if self.starvation else None
        logs = self.launcher.log_dir  # the user's log_dir: the notice names it, not ours
        self.first_data.started(receiver.ingest.samples_put, logs or study_dir / "logs")
        # the stall watchdog asks the launcher before it fails a silent stream
        self.stream.excuse_silence(self.launcher.silence_explained)
        self._started = True

    def wait_for(self, n_samples: int, timeout: float) -> None:
        """The stream's `wait_for`, between two checks of the study (cheap at `timeout`
        0: one attribute read; the "every simulation ended" check runs only when the
        reader waits). Raises `SourceError` (module docstring)."""
        try:
            self._check_launcher()
            try:
                self.stream.wait_for(n_samples, timeout)
            except SourceError as exc:
                if not self._started:
                    raise
                failures = self.launcher.failures()
                raise SourceError(f"{exc}\n{failures}") from exc.__cause__ or exc
            self._check_launcher()
            if self.starvation is not None:  # (`study.starvation`)
                self.starvation.check(n_samples, timeout)
            if timeout > 0:
                receiver = self.stream.receiver
                if self._started and receiver is not None:  # (every simulation ended?)
                    expected = self.stream.config.expected_simulations
                    check_waiting(self.launcher, receiver, self._rank, expected, ENDED_GRACE)
                    self.first_data.check(receiver.ingest.samples_put, self.launcher)
        except SourceError:
            self._failed = True  # (stop need not wait for the last simulations' data)
            raise

    def _check_launcher(self) -> None:
        if not self._started:
            return
        try:
            self.launcher.check()
        except Exception as exc:  # (`from None`: chained, its report would print twice)
            raise study_failed(exc) from None

    @property
    def adaptive(self) -> bool:
        """Whether the launcher's sampler is steered by per-simulation losses (adaptive)."""
        return isinstance(self.launcher.sampler, AdaptiveSampler)

    def hooks(self, args: TrainingArguments) -> list[Hook]:
        """`StudyEvents` (the run's lifecycle, told to this study); with an adaptive
        sampler, first a `SimulationLossTracker` (every ``simulation_loss_steps`` steps,
        `DEFAULT_SIMULATION_LOSS_STEPS` when unset) and an `AdaptiveFeed` after it.

        Raises:
            ValueError: the sampler is adaptive and ``simulation_loss_steps`` is 0.
        """
        if not self.adaptive:
            return [StudyEvents(self)]
        steps = resolve_loss_steps(args.simulation_loss_steps, wanted=True)
        self.feedback.loss_steps = steps
        return [SimulationLossTracker(steps), AdaptiveFeed(self), StudyEvents(self)]

    def observe_simulation_losses(self, updated: Mapping[int, SimulationLoss]) -> None:
        """Rank 0 steers the sampler with each updated simulation's `relative` loss (the
        launcher takes its lock; the next draw, here or by a worker, sees them)."""
        if self._rank != 0 or not self._started or not self.adaptive:
            return
        self.launcher.observe({sid: loss.relative for sid, loss in updated.items()})

    def telemetry(self) -> dict[str, float]:
        """The stream's figures and the launcher's (``launcher_running``, …; rank 0's,
        zeros on the other ranks, so that sums over ranks are exact)."""
        out = self.stream.telemetry()
        summary = self.launcher.summary() if self._started else {}
        out.update({f"launcher_{k}": float(summary.get(k, 0.0)) for k in LAUNCHER_KEYS})
        return out
