"""`Event`: the points of the training loop where hooks are called, and the loop itself
in pseudocode (what fires when, what a request made in an event does and when).

The `Hook` base class (one method per event) and the dispatcher, `HookList`, are in
`melissa_trainer.hooks.base`, which re-exports `Event`.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Event"]


class Event(str, Enum):
    """The points of the training loop where hooks are called.

    The loop, in pseudocode (each name is the event fired there; ACT is an *action
    point*: the log, validation and checkpoint requested since the previous one, see
    `TrainerControl`)::

        if resume_from_checkpoint:
            load checkpoint                       # LOAD
        start the source; catch SIGTERM/SIGINT (preemption)
        barrier (every rank's source started)
        SOURCE_STARTED                            # a study starts its simulations
        TRAIN_START
        while True:
            window = up to the next multiple of stop_sync_steps, fewer if max_steps is
                     nearer; none: stop; 1 step before a run's first step
            if nothing was agreed ahead on this window:
                take the window's batches         # a rank waiting for data also looks
                                                  # for a signal, and stops waiting
                all-reduce (should_stop, batches in hand, signal caught)  # one collective
            read the agreement (the ranks' should_stop, most batches in hand, signal)
            a rank with fewer batches than the most pads its window with its last
                batches again                     # no rank's data is left untrained
            if any rank caught a signal or set control.should_stop: stop
            under several ranks, if this window is whole and another follows:
                take the next window's batches and start its all-reduce (async: read at
                the next window's top; a stop raised in this window rides in the one
                started at its end, so it takes effect one window later)
            for each step of the window:
                STEP_START
                for each micro-batch of the step:
                    BATCH_READY                   # the collated batch, on device
                    forward, loss, backward
                    SAMPLE_LOSSES                 # the per-sample losses and their
                                                  # simulation ids, if a hook listens
                    AFTER_BACKWARD                # the (unscaled) loss tensor
                optimizer step, scheduler step, zero grad
                STEP_END                          # FlowHook requests log/validate/save;
                                                  # every simulation_loss_steps steps the
                                                  # SimulationLossTracker (first) reduces
                                                  # the per-simulation losses over ranks:
                                                  # SIMULATION_LOSSES, the ones that changed
                ACT
                stage the window's next batch     # stage_batches: collated, its copy to
                                                  # the device started (still pending)
            if the data ran out on every rank:
                END_OF_STREAM                     # a hook may ask for a rewind
                if control.should_rewind:
                    PSEUDO_EPOCH_END; ACT; replay buffer; PSEUDO_EPOCH_START
                else: stop
        LOOP_END                                  # a study first waits for its last
                                                  # simulations' exits (stream ended);
                                                  # FlowHook's final requests
        ACT                                       # (its log's rates: not LOOP_END's time)
        if preempted and no checkpoint of this step yet: write checkpoint; SAVE
        if preempted: PREEMPTED                   # a study then stops without waiting
        stop the source (the simulations)
        TRAIN_END                                 # everything is done: requests left
                                                  # unperformed are warned about; the
                                                  # SimulationLossTracker (first) reduces
                                                  # the steps since its last reduction:
                                                  # SIMULATION_LOSSES
        if preempted: raise Preempted             # exit code 128 + signal number
        (always, also on an exception: stop the source, close every hook, restore the
         signal handlers; an exception skips the events not reached, TRAIN_END included)

    where ACT is::

        if control.should_log:      LOG (mean loss over ranks, lr, rates)
        if control.should_validate: VALIDATION_START; evaluate; VALIDATION_END
        if control.should_save:     write checkpoint; SAVE

    each flag cleared as its action starts. A flag set in any event is honoured at the
    next ACT (under several ranks a hook's log, validation or save at the ranks' next
    agreement, any rank's request every rank's: `TrainerControl.defer`;
    `should_stop` at the next stop synchronisation, one window later under
    several ranks, `should_rewind` at the
    next END_OF_STREAM); none is dropped (one set in PREEMPTED or TRAIN_END, after the
    last ACT, is warned about).

    The source's lifecycle is told through events, which every hook sees: a source
    that must act on them gives the trainer its hooks (`Source.hooks`, installed
    first), as a `Study` does (SOURCE_STARTED, END_OF_STREAM, PREEMPTED; an adaptive
    study adds a `SimulationLossTracker` and a feed of SIMULATION_LOSSES to its
    sampler). SAMPLE_LOSSES costs nothing unless some hook overrides
    `on_sample_losses` (read by the trainer at construction and at each `train()`):
    the step's loss is then the mean of `compute_sample_losses` (one forward pass).

    Every rank fires the same events at the same steps (END_OF_STREAM too, when the
    data ran out on every rank: until then, a rank whose data ran out first trains on
    its last batches again, `StreamDataset.pad`). On preemption (`trainer.preempted_by` is then the
    signal, from LOOP_END on) the built-in `FlowHook` skips its final validation, to
    spend the time before the job is killed on the checkpoint.
    """

    LOAD = "on_load"
    SOURCE_STARTED = "on_source_started"
    TRAIN_START = "on_train_start"
    END_OF_STREAM = "on_end_of_stream"
    PSEUDO_EPOCH_START = "on_pseudo_epoch_start"
    PSEUDO_EPOCH_END = "on_pseudo_epoch_end"
    STEP_START = "on_step_start"
    BATCH_READY = "on_batch_ready"
    SAMPLE_LOSSES = "on_sample_losses"
    AFTER_BACKWARD = "on_after_backward"
    SIMULATION_LOSSES = "on_simulation_losses"
    STEP_END = "on_step_end"
    LOG = "on_log"
    VALIDATION_START = "on_validation_start"
    VALIDATION_END = "on_validation_end"
    SAVE = "on_save"
    LOOP_END = "on_loop_end"
    PREEMPTED = "on_preempted"
    TRAIN_END = "on_train_end"
