"""The receiver of docs/protocol.md (sections 10 and 11), written from the document
alone, over `reference_protocol`'s decoder: what a receiver must do with a sequence of
messages (rejections by reason, duplicates, the samples it puts, the simulations it
finishes). See `reference_protocol` for why, and for `Unspecified`. With
``nonfinite="refuse"`` it also says which samples are refused for NaN or Inf: every
complete sample holding one, whatever its parts' FINITE flags (a FINITE part holding
one is `Unspecified`: the flag is the sender's word, section 5).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from reference_protocol import (
    CODE_OF,
    RESERVED,
    Abandon,
    Bye,
    Hello,
    Message,
    Part,
    Reject,
    StudyEnd,
    Unspecified,
    decode,
    holds_nonfinite,
    split,
)

# -- the receiver (sections 10, second table, and 11) ----------------------------------------


@dataclass
class _Sim:
    hello: Hello
    byes: dict[int, int] = field(default_factory=dict)  # client rank -> steps sent
    completed: set[int] = field(default_factory=set)  # time steps put
    # time step -> field name -> [(client rank, offset, n, payload)]
    pending: dict[int, dict[str, list[tuple[int, int, int, bytes]]]] = field(default_factory=dict)
    finished: bool = False
    abandoned: set[int] = field(default_factory=set)  # steps pending at an ABANDON


class ReferenceReceiver:
    """What receiver `rank` of `world_size` does with a sequence of messages, by the
    document: its rejections by reason, duplicates, the samples it puts (in order) and
    the simulations it finishes. `classify` changes nothing when it raises."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        max_bytes: int,
        max_time_step: int,
        mine: Callable[[int], bool] = lambda sim: True,
        nonfinite: str = "accept",
    ) -> None:
        self.mine = mine
        #: the receiver's policy for samples holding NaN or Inf: "accept" (none is
        #: checked) or "refuse" (such a sample is received, but not put)
        assert nonfinite in ("accept", "refuse")
        self.nonfinite = nonfinite
        self.refused = 0  # samples refused for NaN or Inf
        self.rank, self.world_size = rank, world_size
        self.max_bytes, self.max_time_step = max_bytes, max_time_step
        self.sims: dict[int, _Sim] = {}
        self.rejected: Counter[str] = Counter()
        self.duplicates = 0
        self.messages = 0
        self.samples: list[dict[str, np.ndarray]] = []
        self.finished: list[int] = []
        self.abandoned: set[int] = set()

    def classify(self, frames: list[bytes]) -> list[str | None]:
        """Feed one ZeroMQ message; per protocol message (or BATCH record): the reason
        it is rejected, or None (accepted, or a duplicate). Raises `Unspecified` (state
        unchanged) if the document does not say what happens to one of its messages, or
        if one names a simulation that is not `mine` (another sender's: the outcome
        would depend on the order in which the receiver reads the senders)."""
        msgs: list[Message | Reject] = []
        for frame, part in split(frames):
            try:
                msgs.append(decode(frame, part, self.max_bytes))
            except Reject as exc:
                msgs.append(exc)
        decoded = [m for m in msgs if not isinstance(m, Reject)]
        if any(isinstance(m, StudyEnd) for m in decoded):  # (its outcome: the silence after)
            raise Unspecified("a STUDY_END")
        if not all(self.mine(m.sim) for m in decoded):
            raise Unspecified("another sender's simulation")
        keys = [(m.sim, m.name if isinstance(m, Part) else None) for m in decoded]
        if len(set(keys)) == len(keys) and all(isinstance(m, Part) for m in decoded[1:]):
            # the usual case (one message, or the BATCHes of several fields of a rank):
            # no message's outcome depends on an earlier one's, so all are checked
            # before any is applied (a checked message changes nothing)
            plan = [self._plan(m) for m in msgs]
            out: list[str | None] = []
            for m, outcome in zip(msgs, plan, strict=True):
                self.messages += 1
                out.extend(self._apply(m, outcome))
            return out
        return self._classify_in_turn(msgs, {m.sim for m in decoded})

    def _classify_in_turn(
        self, msgs: list[Message | Reject], touched: set[int]
    ) -> list[str | None]:
        """Each message checked against the state the earlier ones left, the state put
        back as it was if one is Unspecified."""
        saved = (
            {s: copy.deepcopy(self.sims.get(s)) for s in touched},
            self.rejected.copy(),
            self.duplicates,
            self.messages,
            len(self.samples),
            len(self.finished),
            set(self.abandoned),
        )
        out: list[str | None] = []
        try:
            for m in msgs:
                outcome = self._plan(m)
                self.messages += 1
                out.extend(self._apply(m, outcome))
        except Unspecified:
            sims, self.rejected, self.duplicates, self.messages, n, f, self.abandoned = saved
            for s, old in sims.items():
                if old is None:
                    self.sims.pop(s, None)
                else:
                    self.sims[s] = old
            del self.samples[n:], self.finished[f:]
            raise
        return out

    def _plan(self, m: Message | Reject) -> Any:
        """The outcome of `m`, without changing state (raises Unspecified)."""
        if isinstance(m, Reject):
            return m.reason
        if isinstance(m, Hello):
            return self._hello_reason(m)
        if isinstance(m, Bye):
            return self._bye_reason(m)
        if isinstance(m, Abandon):
            return None
        return self._part_reasons(m)

    def _hello_reason(self, m: Hello) -> str | None:
        for f in m.fields:  # the first field that breaks a rule gives the reason
            if f.name in RESERVED:
                return "bad_hello"
            if f.nbytes > self.max_bytes:
                return "too_large"
        sim = self.sims.get(m.sim)
        if sim is None:
            return None
        if sim.finished:
            raise Unspecified("a HELLO of a finished simulation (a restart)")
        old = sim.hello
        shifts = [m.sim % self.world_size if r else 0 for r in (old.routing, m.routing)]
        if shifts[0] != shifts[1]:  # (section 3: every HELLO of it routes to the same ranks)
            return "hello_mismatch"
        if (old.fields, old.parameters, old.count) == (m.fields, m.parameters, m.count):
            return None
        same = (old.fields, sorted(old.parameters), old.count)
        if same == (m.fields, sorted(m.parameters), m.count):
            raise Unspecified("the same parameters in another order")
        return "hello_mismatch"

    def _bye_reason(self, m: Bye) -> str | None:
        sim = self.sims.get(m.sim)
        if sim is None:
            return "no_hello"
        if sim.finished and m.count != sim.hello.count:
            raise Unspecified("a BYE of a finished simulation")
        if m.count != sim.hello.count:
            return "bad_client_count"
        if m.rank in sim.byes and sim.byes[m.rank] != m.steps_sent:
            raise Unspecified("a second BYE of a rank, with another count")
        return None

    def _part_reasons(self, m: Part) -> str | list[str | None]:
        """One reason for the whole DATA or BATCH (no HELLO), or one per record."""
        if m.sim not in self.sims:
            return "no_hello"
        if m.finite and any(holds_nonfinite(m.code, p) for p in m.payloads):
            # the FINITE flag is the sender's word (section 5): a receiver may put such
            # a sample or refuse it
            raise Unspecified("FINITE on a payload holding NaN or Inf")
        if len(set(m.steps)) != len(m.steps):
            raise Unspecified("a BATCH holding one time step twice")
        sim = self.sims[m.sim]
        if len(m.steps) > 1 and not sim.finished and len(sim.byes) >= sim.hello.count:
            # it may finish at one record: the later ones are new steps of a finished
            # simulation (section 11: not specified)
            raise Unspecified("a BATCH of a simulation that may finish within it")
        return [self._record_reason(m, t) for t in m.steps]

    def _record_reason(self, m: Part, t: int) -> str | None:
        """Section 10's receiver rules for one DATA (or BATCH record), in their order."""
        sim = self.sims[m.sim]
        if t >= self.max_time_step:
            return "bad_step"
        # section 3: t % W, or (simulation id + t) % W when its HELLO said so
        shift = m.sim if sim.hello.routing == "simulation_step" else 0
        if (shift + t) % self.world_size != self.rank:
            return "wrong_receiver"
        if m.count != sim.hello.count:
            return "bad_client_count"
        spec = next((f for f in sim.hello.fields if f.name == m.name), None)
        if spec is None or CODE_OF[spec.dtype] != m.code or spec.shape != m.shape:
            return "bad_field"
        if t in sim.completed:
            return "duplicate"
        if sim.finished:
            raise Unspecified("a new time step of a finished simulation")
        if t in sim.abandoned:
            raise Unspecified("a step that was pending when its simulation was abandoned")
        parts = sim.pending.get(t, {}).get(m.name, [])
        if any(rank == m.rank for rank, _, _, _ in parts):
            return "duplicate"  # this rank's part of the field came already (a re-send)
        if any(off < m.offset + m.n and m.offset < off + n for _, off, n, _ in parts):
            return "overlap"
        return None

    def _apply(self, m: Message | Reject, outcome: Any) -> list[str | None]:
        if isinstance(outcome, str):  # rejected whole
            self.rejected[outcome] += 1
            return [outcome]
        if isinstance(m, Hello):
            if m.sim not in self.sims:
                self.sims[m.sim] = _Sim(m)
            return [None]
        if isinstance(m, Bye):
            self.sims[m.sim].byes[m.rank] = m.steps_sent
            self._maybe_finish(m.sim)
            return [None]
        if isinstance(m, Abandon):
            self.abandoned.add(m.sim)
            if m.sim in self.sims:
                s = self.sims[m.sim]
                s.abandoned |= set(s.pending)
            return [None]
        assert isinstance(m, Part)
        out: list[str | None] = []
        for t, payload, reason in zip(m.steps, m.payloads, outcome, strict=True):
            if reason == "duplicate":
                self.duplicates += 1
                out.append(None)
            elif reason is not None:
                self.rejected[reason] += 1
                out.append(reason)
            else:
                self._add(m, t, payload)
                out.append(None)
        return out

    def _add(self, m: Part, t: int, payload: bytes) -> None:
        sim = self.sims[m.sim]
        step = sim.pending.setdefault(t, {})
        step.setdefault(m.name, []).append((m.rank, m.offset, m.n, payload))
        fields = sim.hello.fields
        if any(sum(p[2] for p in step.get(f.name, [])) != f.size for f in fields):
            return
        sample: dict[str, np.ndarray] = {}
        for f in fields:
            data = b"".join(p[3] for p in sorted(step[f.name], key=lambda p: p[1]))
            sample[f.name] = np.frombuffer(data, dtype=np.dtype(f.dtype)).reshape(f.shape)
        if self.nonfinite == "refuse" and any(
            holds_nonfinite(CODE_OF[f.dtype], sample[f.name].tobytes()) for f in fields
        ):
            # received (a re-send is a duplicate, it counts towards the end), not put
            del sim.pending[t]
            sim.completed.add(t)
            self.refused += 1
            self._maybe_finish(m.sim)
            return
        sample["simulation_id"] = np.array(m.sim, dtype=np.int64)
        sample["time_step"] = np.array(t, dtype=np.int64)
        sample["parameters"] = np.array([v for _, v in sim.hello.parameters], dtype=np.float64)
        del sim.pending[t]
        sim.completed.add(t)
        self.samples.append(sample)
        self._maybe_finish(m.sim)

    def _maybe_finish(self, sid: int) -> None:
        """Section 11, End: every client rank's BYE, and as many steps as the largest
        count they give."""
        sim = self.sims[sid]
        if sim.finished or len(sim.byes) < sim.hello.count:
            return
        if len(sim.completed) >= max(sim.byes.values()):
            sim.finished = True
            self.finished.append(sid)
