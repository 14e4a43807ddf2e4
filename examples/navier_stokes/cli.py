"""The Navier–Stokes example's command line beyond its fields (`train.FlowArgs`): what
``--help`` adds to the library's words (`NOTES`). Its parser, whose refusals print a
one-line usage before the error, is every study example's
(`study_common.ShortUsageParser`)."""

from __future__ import annotations

import argparse

__all__ = ["COMPILE_NOTE", "JSON_NOTE", "NOTES", "add_notes"]

#: what ``--help`` adds to the library's words on ``--torch_compile`` (a user trial: a
#: small CPU study trained 17 steps instead of 73, its stream over while it compiled)
COMPILE_NOTE = (
    " On a CPU at this example's small sizes the first step's compilation (30 s on 2 "
    "busy cores, 8 s with inductor's cache warm) can outlast the study: training then "
    "ends with the stream after far fewer steps (a 32^2 study of 8 simulations: 17 "
    "instead of 73). The end-of-run line's 'each sample trained on N times' shows it "
    "(against --sample_to_insert_ratio); stream more (--num_simulations, --time_steps) "
    "or leave compilation to a GPU."
)
#: what ``--help`` adds on ``--json`` (a user trial: a run stopped by Ctrl-C ended with
#: "preempted by SIGINT at step 80; checkpoint ..." and exit status 130, no summary)
JSON_NOTE = (
    ", when the run ends. A run stopped before its end (Ctrl-C, SIGTERM, its launcher's "
    "death) prints no summary: its log says 'preempted by SIGINT at step N; checkpoint "
    "...' and it exits non-zero (128 + the signal: 130 for Ctrl-C, 143 for SIGTERM; "
    "accelerate launch reports 1). Read the last line only after an exit status of 0"
)
#: flag -> the words added to its help, before its "(default: ...)"
NOTES = {"torch_compile": COMPILE_NOTE, "json": JSON_NOTE}


def add_notes(parser: argparse.ArgumentParser) -> None:
    """Put each of `NOTES` in its flag's help, before the "(default: ...)" note."""
    for action in parser._actions:  # argparse keeps no public list of a parser's actions
        note = NOTES.get(action.dest)
        if note is not None and action.help not in (None, argparse.SUPPRESS):
            action.help = action.help.replace(" (default:", note + " (default:", 1)
