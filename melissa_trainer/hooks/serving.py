"""`ServingHook`: the model served to the running simulations while it trains, and to
in-process callers (a hook, an adaptive sampler), through one inference path.

    serving = ServingHook(
        inputs={"u": ((64,), "float32")},
        process_inputs=lambda s: torch.from_numpy(s["u"].copy()),
        process_outputs=lambda y: {"u_next": y},
    )
    trainer = OnlineTrainer(model, args, opt, train_source=study, hooks=[serving])
    # a simulation: outputs, version = client.predict({"u": u}, timeout=0.5)
    # in process:   outputs, version = serving.predict({"u": u})

Each rank binds a serving socket beside its receiver (same interface, CURVE keys and
run id; ``serve_{rank}.json`` in the stream's rendezvous directory: `serving_socket`)
and serves the simulations ``id % W == rank`` with its own replica
(`melissa_trainer.stream.serving`).
Between training steps (STEP_END, after the optimizer step: the model version is the
global step), it drains that rank's bounded queue, in batches of at most `max_batch`:
`process_inputs` turns each request's arrays into model inputs (the inference
counterpart of `process_sample`), they are stacked (`fast_collate`), moved to the
device, and the model runs under ``torch.no_grad()``, in eval mode and the trainer's
autocast; `process_outputs` turns its output into named tensors (default
``{"prediction": output}``), each split per request along its first dimension and sent
back as numpy arrays. Its shapes are checked at TRAIN_START on requests of zeros
(`serving_checks.probe_outputs`: ``(batch, *declared)`` for the declared `outputs`),
and at each batch.

Cost bound: serving spends at most `share` of the training time (default 5%), as a token
bucket (`serving_budget.ServingBudget`): each step earns `share` x its seconds between
step ends less serving (up to `serving_budget.BURST_STEPS` steps' worth), each batch
spends what it took; a batch starts only with credit left, so the excess is at most one
batch, repaid by the next steps. Requests that arrive faster than the budget serves them
fill the queue, beyond which they are refused ``busy`` (the client's `PredictRefused`):
no unbounded queue.

Latency bound, in steps: a request queued while the model is at version ``v`` (the
global step) is answered by a model of version ``v + max_latency_steps`` at the latest
(default 16; 0: at the next step's end), while training steps run: at each step's end
(`serving_steps.StepServing`, which applies both bounds), a batch whose oldest request
is due is served whatever the budget (charged to it, so the next batches wait until the
steps have repaid it). The bound wins over the share:
serving exceeds its share only while requests come faster than the share serves them
within the bound (`max_latency_steps=None`: the share alone, no bound). A request can
still end unanswered: refused ``busy`` at arrival, past its client's timeout (dropped),
or when training ends (refused ``not_serving``).

Idle serving: while no training step runs for a while (a few typical steps) after the
last one ended, training is waiting (for data, for the other ranks, on a checkpoint),
and a thread of the hook serves the queue in that idle time, free of the budget
(`serving_idle`: the rule): a simulation that waits for its prediction before sending
the data training waits for is answered, not timed out. The model is held by one side
at a time: a step that starts while the thread runs a batch waits for that batch, and
the wait is charged to the budget. Before TRAIN_START and after LOOP_END requests are
refused ``not_serving``.

In process: `predict` and `predict_batch` from the training thread (a hook) run at
once; from another thread (an adaptive sampler's) they are queued like a simulation's
request and answered at the next step's end (blocking up to `timeout`:
`serving_in_process`).

Requests lost to their timeout: most of a window's answered late or expired is one
WARNING naming the forward's time, the clients' timeout and the fixes (`serving_slow`),
and the end-of-run line is then a WARNING, INFO otherwise.

Not checkpointed: serving holds no state worth a restart (clients time out and ask again).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from melissa_trainer.core.control import TrainerControl
from melissa_trainer.core.state import TrainerState
from melissa_trainer.hooks.hook import Hook
from melissa_trainer.hooks.inference import Inference
from melissa_trainer.hooks.serving_batches import ServedBatches
from melissa_trainer.hooks.serving_budget import ServingBudget
from melissa_trainer.hooks.serving_checks import (
    check_limits,
    check_serving,
    declared_outputs,
    probe_model,
)
from melissa_trainer.hooks.serving_idle import IdleServing
from melissa_trainer.hooks.serving_in_process import (
    InProcessPrediction,
    check_now,
    queued,
    request_arrays,
)
from melissa_trainer.hooks.serving_report import LOG_MAXIMA, log_figures, log_summary
from melissa_trainer.hooks.serving_slow import SlowServing
from melissa_trainer.hooks.serving_socket import rank_server, start_server
from melissa_trainer.hooks.serving_steps import StepServing
from melissa_trainer.stream.serving import PredictServer
from melissa_trainer.stream.serving_queue import DEFAULT_MAX_QUEUE, Pending

if TYPE_CHECKING:  # pragma: no cover
    from melissa_trainer.core.view import TrainerView

__all__ = ["DEFAULT_MAX_LATENCY_STEPS", "ServingHook"]

logger = logging.getLogger(__name__)

#: default `ServingHook.max_latency_steps`
DEFAULT_MAX_LATENCY_STEPS = 16


class ServingHook(Hook):
    """Serves the training model's predictions between steps (module docstring).

    Args:
        inputs: the arrays a request carries, ``{name: (shape, dtype)}`` as a client
            declares fields (one request, no batch dimension).
        process_inputs: one request's arrays (read-only numpy) -> the model's input for
            it (tensors, tuples or dicts of tensors, stacked into a batch). Default: the
            single input as a tensor (required with several inputs).
        process_outputs: the model's output for a batch -> ``{name: tensor [batch, ...]}``.
            Default ``{"prediction": output}``.
        share: the largest share of training time spent serving, in (0, 1] (default 0.05).
        max_batch: requests run together at most.
        max_queue: requests waiting at most per rank; more are refused ``busy``.
        max_latency_steps: a request is answered by the model at most this many versions
            (training steps) after the one it arrived at, whatever the budget (module
            docstring); None: no bound but the budget's. Default 16.
        bind: the serving endpoint to bind, an explicit TCP port offset by the rank
            (rank r binds port + r, as the receivers do); default: the receiver's
            interface, a random port (no stream source: no socket, in-process only).
        rendezvous_dir: where ``serve_{rank}.json`` goes; default the stream's.
        outputs: the outputs of one request, ``{name: (shape, dtype)}`` as
            `process_outputs` names them, without the batch dimension: each served
            batch's must be of shape ``(batch, *shape)``, and is sent as `dtype`.
            Default None: any names, of first dimension the batch.

    Raises:
        ValueError: at TRAIN_START, when `process_outputs` returns outputs of the wrong
            shape for a probe of zero-valued requests (`serving_checks.probe_outputs`:
            two batch sizes unlike any declared dimension, one when `outputs` is
            declared); a probe that raises otherwise is skipped (logged).
    """

    def __init__(
        self,
        inputs: Mapping[str, tuple[Any, Any]],
        process_inputs: Callable[[Mapping[str, np.ndarray]], Any] | None = None,
        process_outputs: Callable[[Any], Mapping[str, torch.Tensor]] | None = None,
        *,
        share: float = 0.05,
        max_batch: int = 32,
        max_queue: int = DEFAULT_MAX_QUEUE,
        max_latency_steps: int | None = DEFAULT_MAX_LATENCY_STEPS,
        bind: str | None = None,
        rendezvous_dir: str | None = None,
        outputs: Mapping[str, tuple[Any, Any]] | None = None,
    ) -> None:
        check_serving(inputs, process_inputs, process_outputs, max_queue, bind)  # (now)
        self._server = PredictServer(inputs, max_queue=max_queue)
        self.inputs = self._server.inputs
        self.outputs = declared_outputs(outputs)
        self._inference = Inference(self.inputs, process_inputs, process_outputs, self.outputs)
        self._probed = False  # (`probe_model`: once, at the first TRAIN_START)
        self.budget = ServingBudget(share)
        check_limits(max_batch, max_latency_steps)
        self.max_batch, self.max_queue = max_batch, max_queue
        self.max_latency_steps = max_latency_steps
        self._bind, self._rendezvous = bind, rendezvous_dir
        self._trainer: TrainerView | None = None
        self._thread: int | None = None  # the training thread
        self._steps = StepServing(self.budget, max_batch, max_latency_steps)
        # the batches served, their latencies, and the failed inferences logged
        self._failures_clock: Callable[[], float] = time.monotonic  # (tests inject one)
        self._runs = ServedBatches(self._inference, logger, self._failures_clock)
        # the model, held by the training thread (a step, a validation: reentrant) or by
        # the idle thread (one batch)
        self._model = threading.RLock()
        # most answers late or expired: a WARNING, rate-limited (`serving_slow`)
        self._slow = SlowServing(
            logger,
            "serving",
            lambda: self._failures_clock(),
            self._steps.typical_step,
            {"max_batch": max_batch, "max_latency_steps": max_latency_steps, "share": share},
        )
        self._runs.on_forward = self._slow.forward
        self._idle = IdleServing(
            self._model, lambda: self.budget.idle_after(), lambda: self._steps.last_end, self._tick
        )

    # -- events ----------------------------------------------------------------------

    def on_source_started(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self._trainer, self._thread = trainer, threading.get_ident()
        self._runs.name(f"serving of rank {trainer.process_index}", self._failures_clock)
        self._slow.who = f"serving of rank {trainer.process_index}"
        server = rank_server(self.inputs, trainer, self._bind, self._rendezvous, self.max_queue)
        if server is None:
            return  # in-process serving only (`predict` from another thread still queues)
        self._server = server
        start_server(server, trainer, logger)

    def on_train_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self._trainer, self._thread = trainer, threading.get_ident()
        if not self._probed:  # (before serving: a wrong shape fails the run, not requests)
            self._probed = True
            probe_model(trainer, self._inference, self.inputs, self.outputs, logger)
        self._server.version = state.global_step
        self._server.serving = True
        self._steps.train_start()
        server = self._server
        self._idle.start(server, lambda: self._serve(server.take(self.max_batch), server.version))

    def on_step_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self._steps.step_start(self._model)

    def on_validation_start(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self._model.acquire()

    def on_validation_end(
        self,
        trainer: TrainerView,
        state: TrainerState,
        control: TrainerControl,
        metrics: dict[str, float],
    ) -> None:
        self._release_model()

    def on_step_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self._server.version = state.global_step
        self._steps.step_end(self._server, state.global_step, self._serve)
        self._release_model()
        self._tick()

    def on_loop_end(
        self, trainer: TrainerView, state: TrainerState, control: TrainerControl
    ) -> None:
        self._stop_serving()

    def close(self) -> None:
        self._stop_serving()
        self._idle.stop()
        self._runs.flush()  # (the failures not logged in full, counted)
        self._server.stop()
        # (a last look: a run that ended before a check saw enough requests is told too)
        self._slow.check(self._server.telemetry(), self._server.late_timeouts())
        log_summary(logger, self._trainer, self.telemetry())

    # -- in process ------------------------------------------------------------------

    @property
    def endpoint(self) -> str | None:
        """This rank's serving endpoint (None: not bound, in-process only)."""
        return self._server.endpoint

    def predict(
        self, inputs: Mapping[str, Any], timeout: float | None = 60.0
    ) -> InProcessPrediction:
        """The current model's outputs for one request's `inputs` (the declared arrays),
        and its version. On the training thread (from a hook) it runs now; from another
        thread it is queued and answered at the next step's end, waiting up to `timeout`
        seconds (None: no bound).

        Raises:
            ValueError: inputs that are not the declared ones, or hold NaN or Inf
                (refused as a simulation's request is, under ``nonfinite``); from another
                thread, a `timeout` NaN, infinite or not > 0 (None: the unbounded wait).
            ServingRefused: not serving (before TRAIN_START, after LOOP_END) or the
                queue is full (``reason``).
            TimeoutError: no step ended within `timeout` (training waits for data).
        """
        outputs, version = self.predict_batch([inputs], timeout)
        return InProcessPrediction(outputs[0], version)

    def predict_batch(
        self, samples: Sequence[Mapping[str, Any]], timeout: float | None = 60.0
    ) -> InProcessPrediction:
        """`predict` for several requests at once (run as one batch on the training
        thread): `outputs` is a list, one dict per sample, in order; none for no sample,
        at once, with the version now (it raised IndexError, or ValueError "max() arg is
        an empty sequence" from another thread: a sampler with no candidate left)."""
        arrays = request_arrays(samples)  # (TypeError for what is not {name: array})
        if not arrays:
            return InProcessPrediction([], self._server.version)
        if threading.get_ident() == self._thread and self._trainer is not None:
            check_now(self._server, arrays)  # (what `PredictServer.submit` checks)
            with self._model:  # (the idle thread's batch ends first)
                version = self._trainer.state.global_step
                return InProcessPrediction(self._inference.run(self._trainer, arrays), version)
        return queued(self._server, arrays, timeout)

    log_maxima = LOG_MAXIMA

    def log_figures(self, trainer: TrainerView) -> dict[str, float]:
        """The serving figures of the training logs (`serving_report`)."""
        return log_figures(self.telemetry())

    def telemetry(self) -> dict[str, float]:
        """The server's counters (requests, answered, refused_*, rejected_*, expired),
        the batches run, the serving share of training time and latency percentiles
        (steps, ms) of the most recent answers."""
        out: dict[str, float] = dict(self._server.telemetry())
        out["batches"] = self._runs.batches
        out["serving_share"] = self.budget.used_share
        out.update(self._runs.latencies())
        return out

    # -- internals -------------------------------------------------------------------

    def _tick(self) -> None:
        """The periodic logs: the failures' summary, the slow-serving warning."""
        self._runs.tick()
        self._slow.check(self._server.telemetry(), self._server.late_timeouts())

    def _release_model(self) -> None:
        self._model.release()  # (taken by the same thread at STEP_START or VALIDATION_START)

    def _stop_serving(self) -> None:
        server = self._server
        server.serving = False
        for pending in server.take(server.max_queue):
            server.refuse(pending, "not_serving", "the trainer stopped serving")

    def _serve(self, batch: list[Pending], version: int) -> None:
        self._runs.serve(self._server, self._trainer, batch, version)
