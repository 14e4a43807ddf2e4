"""`FailedZones`: where a sampler's simulations were given up, as no-go zones of its
unit cube (the surrogate sampler's failure handling, `launcher.surrogate`).

A solver that fails for some parameters (it exits 1, hangs, or writes NaN) usually
fails in a *region* of them, and a region the surrogate trains badly in is the region an
acquisition aims at: a given-up simulation's first samples were trained on with a high
loss, and the uncertainty next to an unknown corner is high. Left alone, an acquisition
sampler draws into the failing region again and again, until the study runs out of
`LauncherTuning.min_finished_fraction`.

A candidate point is **banned** when

- it lies within `radius` (Euclidean distance in the unit cube over the varying
  parameters, the sampler's normalised space: a log-scale parameter in its log) of a
  point given up, or
- it is nearer to a point given up than to every known success (the sampler's
  observed points: simulations whose samples came in and that were not given up): it
  is on the failure's side of the boundary (`launcher.density_replace` replaces a
  design's failures by the same rule). With no success known, the radius alone;
- or it is within `reach` radii (default `REACH`, 3) of a point given up and less than
  `(1 - risk) / risk` (3 at the default `risk`, `RISK`, 1/4) times nearer to a success
  than to it: its **failure risk** is above `risk`. Between a failure at distance `d_F`
  and a success at `d_S`, a boundary anywhere along the way is as likely, and the point
  fails with a probability of about ``d_S / (d_S + d_F)``: the rule above bans a risk
  over 1/2, this one over `risk` where a failure is near enough to tell (farther, both
  distances are large and their ratio says little: banning there would take regions
  never drawn from the study).
  An acquisition aims at the edge of what is allowed (the loss is highest next to a
  failing region): at risk 1/2 every other probe of a boundary failed, a long failing
  boundary cost about one failure per `radius` of its length, and the study of
  `benchmarks/failing_boundary.py` ended with no margin of
  `LauncherTuning.min_finished_fraction`; at 1/4, about half the failures, the same
  coverage of the region that succeeds (figures there).

`risk` and `reach` are options of the samplers that keep zones (`SurrogateSampler`,
`BreedSampler`, beside `avoid`), checked when the sampler is built (`FailedZones`):
`risk` 1/2 or `reach` 0 is the nearest-known-point rule alone; a lower `risk` or a
longer `reach` bans more of the way from a failure to a success: fewer failures along
a failing boundary, and less of the succeeding region next to it drawn (the defaults'
price, 4% of the coverage there: docs/concepts/study.md, "Failures"; no other setting
measured kept the failures down and got it back).

Only failures *for good* count (`Sampler.failed`: the restarts used up): a failed
attempt whose restart succeeded is never told to a sampler, so a transient failure
bans nothing. Deterministic, pure numpy; the points are in the sampler's state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["REACH", "RISK", "FailedZones", "with_zone_defaults"]

#: the default `risk`: the most failure risk a candidate near a failure may take
#: (module docstring)
RISK = 0.25
#: the default `reach`: the risk rule holds within this many `FailedZones.radius` of a
#: failure
REACH = 3.0


class FailedZones:
    """The points of the simulations given up (rows over the `dims` varying parameters
    of the unit cube) and the no-go rule around them (module docstring).

    Args:
        dims: the varying parameters' count.
        radius: the no-go radius around each point given up (unit-cube distance, >= 0;
            0: only the nearest-known-point rule).
        risk: the most failure risk within `reach` radii of a failure (in (0, 1/2];
            1/2: the nearest-known-point rule alone, the rule before the risk's).
        reach: where the risk rule holds, in radii from a failure (finite, >= 0; 0:
            nowhere, the nearest-known-point rule alone).

    Raises:
        ValueError: `risk` or `reach` out of range (a sampler's options: the message
            names the option, its range and what its ends mean).
    """

    def __init__(self, dims: int, radius: float, risk: float = RISK, reach: float = REACH) -> None:
        self.dims, self.radius = dims, radius
        self.risk, self.reach = _checked_risk(risk), _checked_reach(reach)
        #: the ids given up, in the order told
        self.ids: list[int] = []
        self._id_set: set[int] = set()  # (the same: `in`, once per loss report)
        self._points: list[list[float]] = []

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, simulation_id: object) -> bool:
        """Whether `simulation_id` was given up (O(1): a sampler asks at each report)."""
        return simulation_id in self._id_set

    @property
    def points(self) -> np.ndarray:
        """The points given up, oldest first (rows over the varying parameters)."""
        return np.asarray(self._points, dtype=np.float64).reshape(len(self._points), self.dims)

    def add(self, simulation_id: int, unit: np.ndarray) -> None:
        """Record simulation `simulation_id`, given up at `unit` (varying parameters);
        a simulation told twice is recorded once."""
        if simulation_id in self._id_set:
            return
        self.ids.append(int(simulation_id))
        self._id_set.add(int(simulation_id))
        self._points.append([float(v) for v in np.clip(unit, 0.0, 1.0)])

    def distance(self, candidates: np.ndarray) -> np.ndarray:
        """Each candidate's distance to its nearest point given up (inf: none)."""
        return _nearest(candidates, self.points)

    def allowed(self, candidates: np.ndarray, known: np.ndarray) -> np.ndarray:
        """Which `candidates` are not banned (module docstring), given the `known`
        points (rows as the candidates'; the points given up among them, or not, alike:
        a known point at a point given up is that failure, not a success)."""
        if not self.ids:
            return np.ones(len(candidates), dtype=bool)
        failed = self.points
        to_failed = _nearest(candidates, failed)
        out: np.ndarray = to_failed >= self.radius
        if len(known):
            known = known[_nearest(known, failed) > 1e-6]  # the successes (so far)
        if len(known):  # with none to weigh against, the radius alone
            to_known = _nearest(candidates, known)
            out &= to_failed >= to_known
            if self.risk < 0.5:  # (1/2: the line above says it all)
                near = to_failed < self.reach * self.radius
                out &= ~near | (to_failed >= (1.0 - self.risk) / self.risk * to_known)
        return out

    def choose(self, candidates: np.ndarray, score: np.ndarray, known: np.ndarray) -> int:
        """The index of the best-scored allowed candidate (the first of equals); when
        every candidate is banned, the one farthest from every point given up."""
        mask = self.allowed(candidates, known)
        if not mask.any():
            return int(np.argmax(self.distance(candidates)))
        return int(np.argmax(np.where(mask, score, -np.inf)))

    def state_dict(self) -> list[list[Any]]:
        """JSON-serializable: ``[[id, [unit...]], ...]``, oldest first."""
        return [[sid, list(point)] for sid, point in zip(self.ids, self._points, strict=True)]

    def load_state_dict(self, state: Any, key: str = "failed") -> None:
        """Restore a `state_dict()`, saved under the sampler state's `key` (the name
        its messages give it).

        Raises:
            ValueError: a malformed state (nothing changes then).
        """
        ids: list[int] = []
        points: list[list[float]] = []
        if not isinstance(state, list):
            raise ValueError(f"sampler state's {key} must be a list, not {state!r}")
        for entry in state:
            ok = isinstance(entry, list | tuple) and len(entry) == 2
            sid, point = entry if ok else (None, None)
            if (
                isinstance(sid, bool)
                or not isinstance(sid, int)
                or not isinstance(point, list | tuple)
                or len(point) != self.dims
                or not all(isinstance(v, int | float) and 0.0 <= v <= 1.0 for v in point)
            ):
                raise ValueError(
                    f"sampler state's {key} entry {entry!r} is not [simulation id, "
                    f"[{self.dims} unit coordinates]]"
                )
            ids.append(sid)
            points.append([float(v) for v in point])
        self.ids, self._id_set, self._points = ids, set(ids), points


def with_zone_defaults(state: Mapping[str, Any]) -> dict[str, Any]:
    """A sampler's `state` with the zones' `risk` and `reach` it lacks when it was saved
    before they were options: the values then hard-coded, `RISK` and `REACH` (a sampler
    built with others refuses it, as any state of other options)."""
    return {"risk": RISK, "reach": REACH, **state}


def _number(value: Any) -> float | None:
    """`value` as a finite float, or None (a bool, a non-number, a NaN, an infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _checked_risk(risk: Any) -> float:
    out = _number(risk)
    if out is None or not 0.0 < out <= 0.5:
        raise ValueError(
            f"risk must be a number in (0, 0.5], not {risk!r}: the most failure risk a "
            f"draw within `reach` radii of a simulation given up may take (default "
            f"{RISK}; 0.5: the nearest-known-point rule alone; lower bans more of the way "
            f"from a failure to a success)"
        )
    return out


def _checked_reach(reach: Any) -> float:
    out = _number(reach)
    if out is None or out < 0.0:
        raise ValueError(
            f"reach must be a finite number >= 0, not {reach!r}: within how many `avoid` "
            f"radii of a simulation given up the risk rule holds (default {REACH}; 0: "
            f"nowhere, the nearest-known-point rule alone)"
        )
    return out


def _nearest(points: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Each row of `points`' distance to its nearest row of `others` (inf: none)."""
    if not len(others):
        return np.full(len(points), np.inf)
    # |a|^2 + |b|^2 - 2ab: a (points x others) matrix, not (points x others x dims)
    squared = np.sum(points * points, 1)[:, None] + np.sum(others * others, 1)[None, :]
    squared -= 2.0 * points @ others.T
    out: np.ndarray = np.sqrt(np.clip(np.min(squared, axis=1), 0.0, None))
    return out
