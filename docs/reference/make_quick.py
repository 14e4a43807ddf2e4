"""Write docs/reference/quick.md, the quick reference, from the code.

    python docs/reference/make_quick.py           # rewrite the page
    python docs/reference/make_quick.py --check   # exit 1 if the page is stale

The names on the page come from the code, not from a person's typing: the events and
their arguments from `Hook`'s methods, the logged figures from the trainer's own
(`TRAINER_FIGURES`), the receivers' and a study's telemetry keys, their TensorBoard tags
and console names from `TensorBoardHook` and `format_logs` themselves, and the
`TrainingArguments` table from the dataclass (field, default, help). What is written
by hand here is the short wording beside them (`WHEN`, `WHAT`, the groups and the
closing sections); tests/docs/test_quick_reference.py checks that the page equals
`render()` and that every name on it is one the code uses.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from pathlib import Path
from typing import Any

from melissa_trainer import Hook, TrainerState, TrainingArguments
from melissa_trainer.core.figures import SOURCE_PREFIX, TRAINER_FIGURES
from melissa_trainer.hooks import Event
from melissa_trainer.hooks.progress import format_logs
from melissa_trainer.hooks.tensorboard import TensorBoardHook
from melissa_trainer.stream.assembly import REJECT_REASONS
from melissa_trainer.stream.ingest_counters import COUNTERS, TAIL_COUNTERS
from melissa_trainer.study.study import LAUNCHER_KEYS

PAGE = Path(__file__).with_name("quick.md")

#: the events in the order a run fires them, with when (hand-written; every `Event` once)
WHEN: list[tuple[str, str]] = [
    ("on_load", "a resume only: the checkpoint was restored"),
    ("on_source_started", "every rank's source started (a `Study` starts its simulations)"),
    ("on_train_start", "once, before the first step"),
    ("on_step_start", "**each step**: before its first micro-batch"),
    ("on_batch_ready", "each micro-batch: collated, on the device, before the forward"),
    ("on_sample_losses", "each micro-batch, after backward; only if a hook overrides it"),
    ("on_after_backward", "each micro-batch, after backward"),
    (
        "on_simulation_losses",
        "every `simulation_loss_steps` steps (before your `on_step_end`), at the end",
    ),
    ("on_step_end", "after the optimizer step (`state.global_step` counts it)"),
    ("on_log", "**action point** after `on_step_end`: every `logging_steps`"),
    ("on_validation_start", "action point: every `eval_steps` and at the end, before the pass"),
    ("on_validation_end", "after the pass: the metrics"),
    ("on_save", "action point: a checkpoint is complete"),
    ("on_end_of_stream", "**the data ran out on every rank**; `control.should_rewind` replays"),
    ("on_pseudo_epoch_end", "a rewind asked for (then an action point)"),
    ("on_pseudo_epoch_start", "the replay starts (`state.pseudo_epoch` advanced)"),
    ("on_loop_end", "**the end**: after the last step; the last requests here"),
    ("on_preempted", "preempted (a signal, the launcher gone): its checkpoint written"),
    ("on_train_end", "last, the source stopped (requests ignored)"),
]

#: what each logged figure is (hand-written); keys are `logs` keys, patterns end in `*`
WHAT: dict[str, str] = {
    "loss": "mean training loss since the last log, all ranks",
    "grad_norm": "mean gradient norm before clipping (only with `max_grad_norm`)",
    "learning_rate": "the scheduler's current rate",
    "samples_per_second": "samples trained on (all ranks) per second since the last log",
    "steps_per_second": "steps per second since the last log",
    "buffer_samples": "samples the buffers hold now, summed over ranks",
    "buffer_fill": "`buffer_samples` / (`buffer_size` x ranks)",
    "buffer_put": "samples inserted since the run began, summed over ranks",
    "buffer_got": (
        "samples taken from the buffer since the run began, those taken ahead for the "
        "steps the stop-sync window has not run yet included (padding not counted)"
    ),
    "buffer_evicted": "samples evicted since the run began",
    "source_messages": (
        "ZeroMQ messages received, all receivers, not samples: each client rank's HELLO "
        "and BYE at each, one DATA per field, time step and client rank, or one BATCH "
        "for several time steps of a field (see the training loop's page)"
    ),
    "source_bytes": "bytes received",
    "source_samples_put": "samples the receivers put into the buffers",
    "source_duplicates": "steps received again and dropped (a restarted simulation)",
    "source_rejected": "messages rejected, all reasons",
    "source_rejected_*": "per reason: {reasons}",
    "source_simulations_finished": "simulations whose every step arrived",
    "source_simulations_abandoned": "simulations given up",
    "source_incomplete_dropped": "partial steps dropped",
    "source_ignored_after_end": "messages after the end of the stream",
    "source_nonfinite_refused": "steps refused for NaN or Inf",
    "source_connections_lost": (
        "connections closed before their BYE, one per client rank and receiver (a client "
        "rank lost under 2 training ranks counts 2)"
    ),
    "source_launcher_*": "a study's simulations (rank 0's counts): {launcher}",
}

#: validation metrics the trainer writes (`reporting.evaluate`, `simulation_errors`)
EVAL: dict[str, str] = {
    "eval_loss": "mean loss over the validation samples",
    "eval_loss_p99": "99th percentile of the held-out simulations' mean losses",
    "eval_loss_max": "the worst held-out simulation's mean loss",
    "eval_simulations": "how many simulations the tails are over",
    "eval_worst_simulation": "the id of the worst held-out simulation (its parameters: "
    "`{output_dir}/held_out_losses.csv`)",
}

#: `TrainingArguments` fields by purpose (every field once: `render` checks)
GROUPS: dict[str, list[str]] = {
    "Output and logs": [
        "output_dir", "logging_dir", "logging_steps", "report_to", "disable_progress_bar",
    ],
    "Steps and batches": [
        "seed", "batch_size", "gradient_accumulation_steps", "max_steps", "pseudo_epochs",
        "max_grad_norm", "mixed_precision", "stage_batches",
    ],
    "Buffer": [
        "buffer", "buffer_size", "buffer_device", "watermark", "sample_to_insert_ratio",
        "sample_to_insert_tolerance", "max_sample_reuse", "draw_choices",
    ],
    "Validation and early stopping": [
        "eval_steps", "metric_for_best_model", "greater_is_better", "early_stopping_patience",
    ],
    "Checkpoints and resume": [
        "save_steps", "save_seconds", "save_at_end", "max_to_keep", "on_save_error",
        "resume_from_checkpoint", "overwrite_output_dir",
    ],
    "Several ranks, studies, compilation": [
        "stop_sync_steps", "simulation_loss_steps", "ddp_find_unused_parameters",
        "torch_compile", "torch_compile_backend", "torch_compile_mode",
    ],
}  # fmt: skip


def logged_keys() -> list[str]:
    """Every `logs` key the trainer writes, in the logs' order (no hook's own)."""
    trainer = ["loss", "grad_norm", "learning_rate", "samples_per_second", "steps_per_second"]
    assert set(trainer) - {"grad_norm"} <= TRAINER_FIGURES, "a trainer figure was renamed"
    buffer = ["buffer_samples", "buffer_fill", "buffer_put", "buffer_got", "buffer_evicted"]
    assert set(trainer) | set(buffer) == TRAINER_FIGURES | {"grad_norm"}, "new figure: name it"
    source = [f"{SOURCE_PREFIX}{k}" for k in (*COUNTERS, "rejected", *TAIL_COUNTERS)]
    launcher = [f"{SOURCE_PREFIX}launcher_{k}" for k in LAUNCHER_KEYS]
    reasons = [f"{SOURCE_PREFIX}rejected_{r}" for r in REJECT_REASONS]
    return [*trainer, *buffer, *source, *reasons, *launcher]


class _Writer:
    """Records the tags a `TensorBoardHook` writes."""

    def __init__(self) -> None:
        self.tags: dict[str, str] = {}
        self._key = ""

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.tags[self._key] = tag

    def flush(self) -> None:
        """(Nothing to flush.)"""


class _Buffer:
    def stats(self) -> Any:
        return type("Stats", (), {"reuse_histogram": {}})()


def tensorboard_tag(key: str, validation: bool = False) -> str:
    """The tag `TensorBoardHook` writes `key` under (a log's, or a validation metric's)."""
    hook, writer = TensorBoardHook("unused"), _Writer()
    hook.writer = writer  # type: ignore[assignment]
    writer._key = key
    trainer: Any = type("Trainer", (), {"buffer": _Buffer()})()
    state: Any = type("State", (), {"global_step": 1})()
    if validation:
        hook.on_validation_end(trainer, state, None, {key: 1.0})  # type: ignore[arg-type]
    else:
        hook.on_log(trainer, state, None, {key: 1.0})  # type: ignore[arg-type]
    return writer.tags[key]


def console_name(key: str) -> str:
    """The name the console line gives `key` (`format_logs`)."""
    return format_logs(1, {key: 1.0}).split(" | ")[1].rsplit(" ", 1)[0]


def extra_arguments(event: str) -> str:
    """The arguments `Hook.<event>` takes besides `(trainer, state, control)`."""
    params = list(inspect.signature(getattr(Hook, event)).parameters)[4:]
    return ", ".join(f"`{p}`" for p in params) or "-"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("*", "\\*")


def events_section() -> list[str]:
    names = [name for name, _ in WHEN]
    assert sorted(names) == sorted(e.value for e in Event), "WHEN must list every Event once"
    rows = ["| # | event | besides `(trainer, state, control)` | fires |", "|---|---|---|---|"]
    rows += [
        f"| {i} | `{name}` | {extra_arguments(name)} | {when} |"
        for i, (name, when) in enumerate(WHEN, 1)
    ]
    return rows


def figures_section() -> list[str]:
    keys = logged_keys()
    reasons = ", ".join(f"`{r}`" for r in REJECT_REASONS)
    launcher = ", ".join(f"`{k}`" for k in LAUNCHER_KEYS)
    rows = ["| `logs` key | TensorBoard | console | what |", "|---|---|---|---|"]
    shown: set[str] = set()
    for key in keys:
        pattern = next((p for p in WHAT if p.endswith("*") and key.startswith(p[:-1])), None)
        if pattern is not None:
            if pattern in shown:
                continue
            shown.add(pattern)
            stem, suffix = pattern[:-1], key[len(pattern) - 1 :]
            tag = tensorboard_tag(key).removesuffix(suffix) + "<name>"
            console = console_name(key).removesuffix(suffix) + "<name>"
            what = WHAT[pattern].format(reasons=reasons, launcher=launcher)
            rows.append(f"| `{stem}<name>` | `{tag}` | `{console}` | {what} |")
            continue
        if key not in WHAT:
            raise KeyError(f"{key}: say what it is in WHAT")
        rows.append(f"| `{key}` | `{tensorboard_tag(key)}` | `{console_name(key)}` | {WHAT[key]} |")
    return rows


def eval_section() -> list[str]:
    rows = ["| metric (`on_validation_end`, `log_history`) | TensorBoard | what |"]
    rows.append("|---|---|---|")
    rows += [f"| `{k}` | `{tensorboard_tag(k, True)}` | {w} |" for k, w in EVAL.items()]
    return rows


def arguments_section() -> list[str]:
    fields = {f.name: f for f in dataclasses.fields(TrainingArguments)}
    grouped = [name for names in GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(fields), (
        f"GROUPS must list every TrainingArguments field once: missing "
        f"{sorted(set(fields) - set(grouped))}, unknown {sorted(set(grouped) - set(fields))}"
    )
    out: list[str] = []
    for group, names in GROUPS.items():
        out += ["", f"**{group}**", "", "| field (`--flag`) | default | what |", "|---|---|---|"]
        for name in names:
            f = fields[name]
            out.append(f"| `{name}` | `{f.default!r}` | {_cell(f.metadata['help'])} |")
    return out


HEAD = """# Quick reference

One screen per topic, for looking things up; the pages linked say why. Generated from
the code by `docs/reference/make_quick.py` (do not edit it by hand: run the script;
`tests/docs/test_quick_reference.py` fails when the page and the code differ).

## Hook events, in the order they fire

Every method of a [`Hook`](../how-to/hooks.md) gets `(trainer, state, control)`; a flag
set on `control` is done at the next *action point* (after `on_step_end`, after
`on_pseudo_epoch_end`, after `on_loop_end`: log, then validation, then save). The loop
in full: [the trainer loop](../concepts/loop.md); the samples of the batch being
trained: `trainer.dataset.last_samples`
([which samples a step trains on](../how-to/hooks.md#which-samples-a-step-trains-on)).
"""

KEEP = TrainerState.LOG_HISTORY_LEN
LOGS = f"""
## Logged figures

Every `logging_steps` steps, identical on every rank (reduced over them): `on_log`'s
`logs`, `trainer.state.log_history`, TensorBoard (under `output_dir/runs`) and the
console line. A hook's `log_figures` keys are added as `train/<key>`, a
`ServingHook`'s as `serving/<name>`
([serving](../how-to/serve-while-training.md)). The console and TensorBoard show a
`source_*` counter only once it is non-zero. TensorBoard also gets `buffer/reuse`, a
histogram of how many times the samples that left the buffer were drawn.
`trainer.state.log_history` keeps the last {KEEP} logs and validations only (it is saved
in every checkpoint), where Hugging Face's keeps all: a long run's curves are
TensorBoard's, or a hook's `on_log` and `on_validation_end` that keep what they need.
"""

EVAL_HEAD = """
## Validation metrics

Every `eval_steps` steps and at the end, with an `eval_dataset`. The tails need a
`simulation_id` in every validation sample; a hook's `eval_figures` keys are added as
`eval_<key>` (TensorBoard `eval/<key>`). `metric_for_best_model` names one of these.
"""

ARGS_HEAD = """
## `TrainingArguments`, by purpose

Each field is also a command-line flag (`--batch_size 64`;
[configuration](../how-to/configuration.md)). Defaults as the dataclass holds them;
`None` means what the text says.
"""

#: the exit codes of a run (hand-written; the test checks the signal's against the code)
EXIT_CODES: list[tuple[str, str]] = [
    ("0", "training ended: end of stream, `max_steps`, early stopping, a hook's `should_stop`"),
    (
        "1",
        "an uncaught error (a hook raised, no sample reached a rank: `NoTrainingError`, "
        "...); `accelerate launch` exits 1 whenever a rank exits non-zero",
    ),
    (
        "2",
        "the command-line parser refused a flag or a value (argparse's status; a "
        "`ConfigError` raised in your own code exits 1, or 2 inside "
        "`refusals_end_the_program`, said once by rank 0); the study examples' refusals to "
        "start or resume (an earlier run's checkpoints in `output_dir`, a locked "
        "`output_dir`, a changed study) ([configuration](../how-to/configuration.md))",
    ),
    (
        "128 + signal",
        "preempted after its checkpoint (`Preempted`): 143 SIGTERM, 130 SIGINT; resume "
        "with `--resume_from_checkpoint latest` ([preemption](../how-to/preemption.md))",
    ),
]

TAIL = """
## What a sample and a batch hold

- **A sample** (what `process_sample` gets, what the buffer holds) is a dict of numpy
  arrays: each field the simulation's client declared, plus `simulation_id` (int64,
  0-d), `time_step` (int64, 0-d, as the simulation numbers them) and `parameters`
  (float64, one value per parameter, in the client's order)
  ([what a sample is](../concepts/stream.md#what-a-sample-is)).
- **A batch** is what `collate_fn` makes of `batch_size` processed samples (default: the
  fields stacked, samples on axis 0), or what `process_batch` makes of a block; the last
  batch of a stream may be smaller. A step is `gradient_accumulation_steps` batches.
- The default loss takes a batch `(inputs, targets)`: `loss_fn(model(inputs), targets)`,
  mean squared error unless `loss_fn` is given; any other layout: override
  `compute_loss(model, batch)`
  ([the loss and the batch](../concepts/loop.md#the-loss-and-the-batch)).

"""


def render() -> str:
    """The page, from the code."""
    lines = [HEAD, *events_section(), LOGS, *figures_section(), EVAL_HEAD, *eval_section()]
    lines += [ARGS_HEAD.rstrip("\n"), *arguments_section(), TAIL.rstrip("\n"), ""]
    lines += ["## Exit codes", ""]
    lines += ["| code | when |", "|---|---|", *(f"| {c} | {w} |" for c, w in EXIT_CODES)]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    page = render()
    if "--check" in argv:
        stale = not PAGE.exists() or PAGE.read_text() != page
        if stale:
            print(f"{PAGE} is stale: run python {Path(__file__).as_posix()}", file=sys.stderr)
        return 1 if stale else 0
    PAGE.write_text(page)
    print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
