"""A launcher's data report (what rank 0's receiver tells its supervisor) where nothing
happens (`Quiet`), or where rank 0's receiver is held behind a full buffer (`Held`),
shared by the launcher and study tests that drive a supervisor by hand."""

from __future__ import annotations

__all__ = ["Held", "Quiet"]


class Quiet:
    """A data report where nothing happens."""

    def completed(self, start: int = 0) -> list[int]:
        return []

    def refused(self, start: int = 0) -> list[tuple[int, str]]:
        return []

    def idle_seconds(self) -> float:
        return 0.0

    def backpressured(self) -> bool:
        return False

    def describe(self, simulation_id: int) -> str:
        return ""

    def first_message_at(self, simulation_id: int) -> float | None:
        return None

    def client_of(self, simulation_id: int) -> str | None:
        return None


class Held(Quiet):
    """A data report of rank 0's receiver: no simulation's data all in, held behind a
    full buffer (`backpressured`, unless `backpressured` is False), never idle (so never
    judged incomplete)."""

    def __init__(self, backpressured: bool = True) -> None:
        self.waits = backpressured

    def backpressured(self) -> bool:
        return self.waits

    def describe(self, simulation_id: int) -> str:
        return "held"
