"""`Client.predict`: the client's `Predictor`, made at its first request, asking as the
run the client sends to, and following a restarted trainer for it.

A client asks as the run it sends to (its run id): a trainer of another run refuses the
request, and a restarted trainer is another run. With a replay window (external mode,
`following`), a request made while the requests before it failed first looks whether
the trainer was restarted (one ``stat`` of the rendezvous; a read only when it was
rewritten: `follow.Follower.rewritten`) and, if so, *follows* it, as the next `send`
would: asks it which steps it holds, sends the others again from the window, and asks
the prediction as the new run. So a solver that asks at every step is answered by the
resumed trainer from its first request after that trainer serves (the predictor's
backoff ends once the rendezvous changes: `predict_link`), not only after a `send`
noticed the restart (at most once a second, and a send may not come for long), and
never by a trainer its stream does not follow.

Why not ask the new run without following: following is what checks that the resumed
trainer takes this simulation (does not abandon it, holds its steps or gets them from
the window). A prediction asked as the new run before that could come from a trainer
that then refuses the simulation's data (the follow fails: the simulation must be run
again), or from another study's trainer started in the same place, whose model's
answer would be wrong for this simulation; the trainer's run id check, which refuses
the old run's requests, exists to prevent exactly that. Following first keeps one rule:
a client's predictions come from the trainer its data goes to.

Cost: a request that follows also pays the follow (the window's steps sent again: what
the next `send` would have paid), beyond its `timeout`, which bounds the request itself
and the wait for the trainer's answer of what it holds: a trainer that does not answer
within it (killed as it started, still starting) fails the request `PredictTimeout`,
nothing followed yet, and the next look (a send, or a request a second later) asks
again (user trial 42: a request waited 4.9 s past its 1 s timeout for a trainer killed
as it published itself, then for its successor). A follow that fails otherwise raises
`FollowError` (a `TimeoutError`, not a `PredictionUnavailable`), as the next `send`
would.

Not thread-safe: the client's thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import zmq

from melissa_trainer.client.follow import Unanswered

if TYPE_CHECKING:
    from melissa_trainer.client.following import Following
    from melissa_trainer.client.predict import Predictor
    from melissa_trainer.client.predict_errors import Predicted

__all__ = ["Asking"]


class Asking:
    """A client's predictor and whether its last request got a prediction.

    Args:
        simulation_id: the client's.
    """

    def __init__(self, simulation_id: int) -> None:
        self.simulation_id = simulation_id
        self.predictor: Predictor | None = None  # (the first request makes it)
        self._failing = False  # the last request got no prediction

    def predict(
        self,
        inputs: Mapping[str, Any],
        timeout: float,
        following: Following | None,
        follow: Callable[[list[dict[str, Any]], float, bool], None],
        run_id: Callable[[], str | None],
        context: Callable[[], zmq.Context],
    ) -> Predicted:
        """`Client.predict` (module docstring): `follow` the restarted trainer first if
        the requests before failed and the rendezvous names one; then ask as `run_id()`
        over sockets of `context()` (the client's transport's, read after the follow)."""
        # (imported here: most simulations never ask, and their start-up should not pay)
        from melissa_trainer.client.predict import Predictor
        from melissa_trainer.client.predict_errors import PredictionUnavailable, PredictTimeout

        if following is not None and self._failing:
            entries = following.follower.rewritten()
            if entries is not None:
                try:  # (`Client._follow`: it calls `before_switch`, `joined`)
                    follow(entries, timeout, True)  # (all runs and receivers: one wait)
                except Unanswered as exc:
                    following.follower.forget()
                    raise PredictTimeout(
                        f"{exc}: the trainer restarted in {following.follower.rendezvous} "
                        f"(run {entries[0].get('run_id')}) is not answering yet (still "
                        "starting, or gone again); this client follows it at its next "
                        "send or request"
                    ) from None

        if self.predictor is None:
            self.predictor = Predictor(self.simulation_id, run_id=run_id(), context=context())
            self.predictor.speak_as(f"simulation {self.simulation_id}", "client")
        elif self.predictor.run_id != run_id():  # (the client's run id set by hand)
            self.predictor.join(run_id(), context())
        try:
            predicted = self.predictor.predict(inputs, timeout)
        except PredictionUnavailable:
            self._failing = True
            raise
        self._failing = False
        return predicted

    def before_switch(self) -> None:
        """Before the client's transport (and its context) is replaced: close the
        predictor's socket (ending a context waits for its sockets: the client hung
        there when a send followed a restarted trainer after an answered request)."""
        if self.predictor is not None:
            self.predictor.disconnect()

    def joined(self, run_id: str | None, context: zmq.Context) -> None:
        """After the client followed the run `run_id`: ask as it, over `context`."""
        if self.predictor is not None:
            self.predictor.join(run_id, context)

    def close(self) -> None:
        if self.predictor is not None:
            self.predictor.close()  # (its own socket, linger 0: nothing to deliver)
