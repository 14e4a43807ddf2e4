"""The set of time steps a client sent to one receiver, small for regular numbering."""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["StepSet"]


class StepSet:
    """The distinct time steps sent, kept as arithmetic runs (0, 1, 2, ... or 0, 10, 20, ...
    take one run, whatever their number); irregular orders fall back to a plain set.

    `count` is what the BYE to a receiver carries. Not thread-safe (the client's thread).
    """

    __slots__ = ("runs", "steps", "count", "next")
    MAX_RUNS = 64

    def __init__(self) -> None:
        self.runs: list[list[int]] = []  # [first, last, stride]; stride 0 for one step
        self.steps: set[int] | None = None
        self.count = 0
        self.next = -1  # the step that extends the only run (-1: no such step)

    def add(self, step: int) -> None:
        if step == self.next:  # the usual case: one run, growing by its stride
            run = self.runs[0]
            run[1] = step
            self.next = step + run[2]
            self.count += 1
            return
        self.next = -1
        if self.steps is not None:
            self.steps.add(step)
            self.count = len(self.steps)
            return
        if self.runs:
            run = self.runs[-1]
            extends = step > run[1] and (run[2] == 0 or step - run[1] == run[2])
            if (len(self.runs) > 1 or not extends) and step in self:
                return
            if extends:
                run[2] = step - run[1]
                run[1] = step
                self.count += 1
                if len(self.runs) == 1:
                    self.next = step + run[2]
                return
        self.runs.append([step, step, 0])
        self.count += 1
        if len(self.runs) > self.MAX_RUNS:
            self.steps = {t for a, b, d in self.runs for t in range(a, b + 1, d or 1)}
            self.runs = []

    def span(self) -> tuple[int, int] | None:
        """The least and greatest step sent (None: none): with `count`, what a close
        compares with a stop record's steps held (`client.stopped`). O(runs)."""
        if self.steps is not None:
            return (min(self.steps), max(self.steps)) if self.steps else None
        if not self.runs:
            return None
        return min(a for a, _, _ in self.runs), max(b for _, b, _ in self.runs)

    def __iter__(self) -> Iterator[int]:
        """The steps (in runs, then in no order for irregular ones)."""
        if self.steps is not None:
            yield from self.steps
            return
        for a, b, d in self.runs:
            yield from range(a, b + 1, d or 1)

    def __contains__(self, step: int) -> bool:
        if self.steps is not None:
            return step in self.steps
        return any(a <= step <= b and (step - a) % (d or 1) == 0 for a, b, d in self.runs)
