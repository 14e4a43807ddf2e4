"""`RunAgain`: what rank 0's receiver says of a simulation that says HELLO after it
finished (its BYE read, every step held).

A second copy of a finished simulation (its id given again by hand, a solver rerun by
mistake) streamed every step, each dropped as a duplicate, and exited 0; nothing said
that it had run for nothing: the end of the stream counted its steps among the
"duplicates" only (measured, tests/stream/test_hello_after_finish.py). Nothing is
trained twice, and nothing needs refusing: the receivers keep one copy of each step
whoever sends it (docs/protocol.md, after the twins). But a user who reran a simulation to
change it (other parameters, a fixed solver) must learn that the trainer kept the
first run's data. The same HELLO comes from legitimate reruns too (a launcher's restart
of an attempt that failed after its BYE; after a resume, a simulation run again for
another rank's data), which a receiver cannot tell apart (a HELLO carries no attempt):
the words name both, and say that nothing is lost nor trained twice. After a resume
(`resumed`: the receiver's record was restored) such HELLOs are the expected path (the
launcher runs again every simulation some rank's checkpoint lacked, finished here or
not), so they are said at INFO there, not as a WARNING on every resume.

Rank 0's receiver only (every attempt says HELLO to every receiver: one line per
simulation, not one per rank), once per simulation id, for the first `SAID_AT_MOST`
ids; then one line saying that further ones are not logged (a whole study rerun by
mistake logs a few lines, not one per simulation). Not thread-safe: the ingester.
"""

from __future__ import annotations

import logging

__all__ = ["SAID_AT_MOST", "RunAgain"]

logger = logging.getLogger("melissa_trainer.stream.receiver")  # the receiver's messages

#: simulations whose HELLO after their finish is logged, each once; then one line more
SAID_AT_MOST = 8


class RunAgain:
    """Logs a HELLO of a finished simulation (module docstring).

    Args:
        rank: the receiver's rank: only rank 0's speaks.
    """

    def __init__(self, rank: int) -> None:
        self._rank = rank
        self._said: set[int] = set()  # (at most SAID_AT_MOST ids: bounded)
        self._more_said = False  # (the line after SAID_AT_MOST, said once)
        self.count = 0  #: HELLOs read of finished simulations (every rank counts)
        #: the receiver's record was restored from a checkpoint (`IngestState.load_state_dict`)
        self.resumed = False

    def hello(self, simulation_id: int, steps: int) -> None:
        """A HELLO of `simulation_id`, which finished here with `steps` time steps."""
        self.count += 1
        if self._rank != 0 or simulation_id in self._said or self._more_said:
            return
        if len(self._said) == SAID_AT_MOST:
            self._more_said = True
            logger.log(
                logging.INFO if self.resumed else logging.WARNING,
                "more finished simulations said HELLO again: not logged one by one; each "
                "one's steps are dropped as duplicates, as above",
            )
            return
        self._said.add(simulation_id)
        if self.resumed:  # (the launcher's rerun for another rank's data: expected)
            logger.info(
                "simulation %d said HELLO again after it finished here (%d time step(s) "
                "held before the resume): run again for another rank's data, its steps "
                "here are dropped as duplicates",
                simulation_id,
                steps,
            )
            return
        logger.warning(
            "simulation %d said HELLO again after it finished (its BYE read, %d time step(s) "
            "held): what it sends now is dropped as duplicates, nothing is trained twice, "
            "and the trainer keeps its first run's data. Harmless if the launcher ran it "
            "again (an attempt that failed after its BYE); if it was "
            "started again by hand, the run was not needed, and a changed simulation "
            "needs a new simulation id",
            simulation_id,
            steps,
        )
