"""What a client is told: by its arguments or the environment the launcher sets (its
simulation id, the receivers' endpoints and run id, its parameters, its replay window,
whether the launcher started it). Each value is checked here, with an error that names
it and says how to fix it. How it sends (`ClientTuning`, the knobs a simulation rarely
changes, and their defaults) is `melissa_trainer.client.tuning`'s; its parameters,
`melissa_trainer.client.parameters`'. Imports the standard library, numpy and pyzmq
only (through `protocol` and `endpoints`): no torch."""

from __future__ import annotations

import operator
import os
from collections.abc import Sequence
from typing import Any

from melissa_trainer import wire as protocol
from melissa_trainer.client.endpoint_form import RECEIVER_FORM, endpoint_fault
from melissa_trainer.client.env_names import unknown_note
from melissa_trainer.client.gave_up import ReceiverNotFound, ReceiverUnreachable
from melissa_trainer.client.rendezvous_words import missing_note, waiting_notice
from melissa_trainer.client.server_key import check_server_key, z85_fault
from melissa_trainer.client.tuning import DEFAULT_REPLAY_BYTES, ClientTuning
from melissa_trainer.client.worker_launcher import ENV_WORKER
from melissa_trainer.config.reading import ConfigError
from melissa_trainer.stream.endpoints import fetch_rendezvous
from melissa_trainer.stream.host_scope import out_of_reach
from melissa_trainer.stream.receiver_address import is_loopback
from melissa_trainer.wire.routing import routing_of_entries

__all__ = [
    "ENV_ENDPOINTS",
    "ENV_KEY",
    "ENV_RENDEZVOUS",
    "ENV_REPLAY_BYTES",
    "ENV_RUN_ID",
    "ENV_SIMULATION_ID",
    "check_attempt",
    "check_simulation_id",
    "check_time_step",
    "launched",
    "rendezvous_dir",
    "replay_bytes_for",
    "resolve_receivers",
    "resolve_run_id",
]

#: The simulation id (an unsigned 64-bit decimal integer).
ENV_SIMULATION_ID = "MELISSA_TRAINER_SIMULATION_ID"
#: Comma-separated receiver endpoints, in training-rank order.
ENV_ENDPOINTS = "MELISSA_TRAINER_ENDPOINTS"
#: The receivers' CURVE public key (Z85, 40 characters; every rank binds with the stream's
#: one), for endpoints given by `ENV_ENDPOINTS` or ``endpoints=`` (a rendezvous
#: publishes its own): as `predict_link.ENV_SERVE_KEY` is for the serving endpoints.
ENV_KEY = "MELISSA_TRAINER_KEY"
#: A directory holding one `rank_{r}.json` per receiver (used when ENDPOINTS is unset).
ENV_RENDEZVOUS = "MELISSA_TRAINER_RENDEZVOUS"
#: The run the simulation belongs to (set by the launcher to its trainer's run id).
ENV_RUN_ID = "MELISSA_TRAINER_RUN_ID"

#: The replay window in bytes (`ClientTuning.replay_bytes`), overriding its default.
ENV_REPLAY_BYTES = "MELISSA_TRAINER_REPLAY_BYTES"
#: Set by the launcher for the simulations it starts (they are restarted by it, not followed).
ENV_ATTEMPT = "MELISSA_TRAINER_ATTEMPT"


def _but(note: str) -> str:
    """`env_names.unknown_note` appended to an error whose likely cause it is."""
    return f"; but {note}" if note else ""


def replay_bytes_for(
    tuning: ClientTuning, rendezvous: str | None, simulation_id: int | None = None
) -> int:
    """The replay window of a client (`ClientTuning.replay_bytes`): as set, else
    ``$MELISSA_TRAINER_REPLAY_BYTES``, else `DEFAULT_REPLAY_BYTES` when the endpoints
    came from `rendezvous` and the launcher did not start the simulation
    (`launched(simulation_id)`), else 0.

    Raises:
        ValueError: ``$MELISSA_TRAINER_REPLAY_BYTES`` is not a non-negative integer.
    """
    if tuning.replay_bytes is not None:
        return tuning.replay_bytes
    value = os.environ.get(ENV_REPLAY_BYTES, "").strip()
    if value:
        try:
            number = int(value)
        except ValueError:
            number = -1
        if number < 0:
            raise ValueError(f"{ENV_REPLAY_BYTES}={value!r} is not a number of bytes >= 0")
        return number
    if rendezvous is None or launched(simulation_id):
        return 0
    return DEFAULT_REPLAY_BYTES


def launched(simulation_id: int | None = None) -> bool:
    """Whether the launcher started this simulation: this process is one it launched
    (``$MELISSA_TRAINER_ATTEMPT`` set), or `simulation_id` is the one it gave this
    process's worker last (`worker_given.given_attempt`: worker mode, where workers get no
    attempt variable). Either way the launcher restarts it and the study records its
    refusal, so it neither keeps a replay window nor asks for its admission while it
    runs (external mode does both). Its close asks for its BYE's receipt only in a
    worker (``launched()``, no id, is false there): a worker lives on and reports the
    simulation finished, which must not come before the BYE was ingested
    (`client.worker`). Another simulation id, or none, in a worker (or any id in a
    process that is no worker) is not launched: as in external mode."""
    if os.environ.get(ENV_ATTEMPT, "").strip():
        return True
    if simulation_id is None:
        return False
    # (imported here: a launched process, most simulations, does not load it)
    from melissa_trainer.client.worker_given import given_attempt  # (stdlib only)

    return given_attempt(simulation_id) is not None


def resolve_receivers(
    endpoints: str | Sequence[str] | None,
    rendezvous_timeout: float,
    simulation_id: int | None = None,
    curve_server_key: str | bytes | None = None,
) -> tuple[list[str], list[str | None], str | None, str | None]:
    """The receiver endpoints, the CURVE server key of each (None: no CURVE), the run
    id they published (None: not read from a rendezvous, or an older trainer) and the
    routing to send with (`wire.routing.routing_of_entries`: ``"simulation_step"`` when
    every rendezvous file advertises it and none lists `simulation_id` as one that keeps
    ``t % W``; None, ``t % W``, otherwise and for endpoints given directly, which may be
    an older trainer's):
    `endpoints` (a list, or one comma-separated string), else
    `$MELISSA_TRAINER_ENDPOINTS`, both with the key `curve_server_key` (checked by
    `check_server_key`), else the one in `$MELISSA_TRAINER_KEY` (unset or blank: no
    CURVE), else those published in `$MELISSA_TRAINER_RENDEZVOUS` with their keys and
    run id (waiting up to `rendezvous_timeout` seconds for them; `$MELISSA_TRAINER_KEY`
    is not read then, and a `curve_server_key` given must be the key they publish: the
    running trainer's, which a restarted one changes).

    Raises:
        ValueError: no endpoint, one not like ``tcp://HOST:PORT``
            (`endpoint_form.endpoint_fault`: "endpoint 'X' has no port: give ...",
            after "MELISSA_TRAINER_ENDPOINTS: " when read from it), or a key in
            `$MELISSA_TRAINER_KEY` that is not a Z85 public key (`server_key.z85_fault`:
            40 characters of the Z85 alphabet, each 5 of them a 32-bit word): said before
            anything is sent, as the serving key's (`predict`).
        ConfigError: (a ValueError) `curve_server_key` not a Z85 public key, or not the
            one the rendezvous publishes.
        ReceiverNotFound: (a `DeliveryFailed`, a TimeoutError) the rendezvous still
            incomplete after `rendezvous_timeout` s.
        ReceiverUnreachable: (a `ReceiverNotFound`) the rendezvous publishes a loopback
            endpoint of another machine or network namespace (`host_scope.out_of_reach`).
    """
    key = None if curve_server_key is None else check_server_key(curve_server_key)
    source = ""  # (where the endpoints came from, in their errors)
    if endpoints is None:
        value = os.environ.get(ENV_ENDPOINTS, "").strip()
        if value:
            endpoints, source = value, f"{ENV_ENDPOINTS}: "
        elif os.environ.get(ENV_RENDEZVOUS, "").strip():
            where = os.environ[ENV_RENDEZVOUS].strip()
            notice = waiting_notice(where, rendezvous_timeout)
            try:
                entries = fetch_rendezvous(where, rendezvous_timeout, notice, alive_only=True)
            except TimeoutError as exc:  # (with the warning's typo hint, read again now)
                raise ReceiverNotFound(f"{exc}{missing_note(where)}") from None
            for entry in entries:  # (a loopback endpoint of another machine: said now)
                why = out_of_reach(entry["endpoint"], entry, is_loopback(entry["endpoint"]))
                if why is not None:
                    raise ReceiverUnreachable(f"rendezvous {where}: {why}")
            keys = [e.get("curve_public_key") for e in entries]
            if key is not None and any(k != key for k in keys):
                raise ConfigError(
                    f"curve_server_key={key!r} is not the key the rendezvous {where} "
                    f"publishes ({', '.join(sorted({str(k) for k in keys}))}; None: its "
                    "receivers take plain connections): the rendezvous gives the running "
                    "trainer's key, so drop curve_server_key= (or pass endpoints= for "
                    "receivers that take this key)"
                )
            routing = routing_of_entries(entries, simulation_id)
            return [e["endpoint"] for e in entries], keys, entries[0].get("run_id"), routing
        else:
            raise ValueError(
                f"no receiver endpoint: pass endpoints=, or set {ENV_ENDPOINTS} (comma-"
                f"separated, e.g. tcp://127.0.0.1:5555) or {ENV_RENDEZVOUS} (the trainer's "
                f"rendezvous directory, {{output_dir}}/rendezvous){_but(unknown_note())}"
            )
    items = endpoints.split(",") if isinstance(endpoints, str) else list(endpoints)
    out = [str(e).strip() for e in items]
    if not out or any("://" not in e for e in out):
        raise ValueError(f"{source}endpoints must be like tcp://HOST:PORT, got {endpoints!r}")
    for e in out:  # (their form, now: libzmq's connect would say "Invalid argument")
        fault = endpoint_fault(e, RECEIVER_FORM)
        if fault is not None:
            raise ValueError(f"{source}{fault}")
    if key is not None:
        return out, [key] * len(out), None, None
    key = os.environ.get(ENV_KEY, "").strip() or None
    fault = None if key is None else z85_fault(key)  # (else libzmq's bare "Invalid argument")
    if fault is not None:
        raise ValueError(
            f"the receivers' CURVE key ({ENV_KEY}) must be the 40-character Z85 public "
            f"key, not {key!r} (it must be {fault}): the trainer's curve_public_key, as its "
            "rendezvous files publish it (rank_N.json); or unset it for receivers without CURVE"
        )
    return out, [key] * len(out), None, None


def rendezvous_dir() -> str | None:
    """The rendezvous directory `resolve_receivers` reads endpoints from when given
    none (`$MELISSA_TRAINER_RENDEZVOUS`, unless `$MELISSA_TRAINER_ENDPOINTS` is set),
    else None."""
    if os.environ.get(ENV_ENDPOINTS, "").strip():
        return None
    return os.environ.get(ENV_RENDEZVOUS, "").strip() or None


def resolve_run_id(
    run_id: str | None, published: str | None, simulation_id: int | None = None
) -> str | None:
    """The run id the HELLO carries: `run_id`, else `$MELISSA_TRAINER_RUN_ID` (what the
    launcher says this simulation belongs to), else the one the rendezvous published,
    else None (no check: any receiver accepts the HELLO). `simulation_id` only words
    the error (`launched`).

    Raises:
        ValueError: a malformed run id (named).
        RuntimeError: the rendezvous was published by another run than the one this
            simulation belongs to: another trainer has taken over the output directory
            (or the rendezvous is a stale copy); streaming there would mix two runs.
    """
    source = "run_id"
    if run_id is None and os.environ.get(ENV_RUN_ID, "").strip():
        run_id, source = os.environ[ENV_RUN_ID].strip(), ENV_RUN_ID
    if run_id is None:
        return published
    protocol.check_run_id(run_id, source)
    if published is not None and published != run_id:
        where = os.environ.get(ENV_RENDEZVOUS, "").strip()
        # (a launched simulation's run id is its launcher's; one started by hand got it
        # from a leftover variable, or its own code, more often than from a takeover)
        fix = (
            "another trainer has taken over that output directory since this simulation "
            "was launched. Its data would go to the wrong trainer: nothing is sent. Give "
            "each trainer its own --output_dir"
            if launched(simulation_id)
            else f"nothing is sent. A solver started by hand need not name its run: unset "
            f"{ENV_RUN_ID} (or pass no run_id) and it streams to the run the rendezvous "
            f"names; if that run is not yours, another trainer has taken over that output "
            f"directory: give each trainer its own --output_dir"
        )
        raise RuntimeError(
            f"the rendezvous directory {where!r} was published by run {published}, but this "
            f"simulation belongs to run {run_id} ({source}): {fix}"
        )
    return run_id


def _worker_hint() -> str:
    """In a worker of worker mode (whose environment names no simulation id: the
    launcher gives one per request), the fix that applies there; else ""."""
    if not os.environ.get(ENV_WORKER, "").strip():
        return ""
    return (
        f" ({ENV_WORKER} is set: in a worker, pass the id its launcher gave, "
        f"Client(..., simulation_id=simulation_id), the first argument of "
        f"serve_simulations' run or next_simulation()'s; a worker has no "
        f"{ENV_SIMULATION_ID})"
    )


def check_simulation_id(value: Any) -> int:
    """`value`, else `$MELISSA_TRAINER_SIMULATION_ID`, as a u64.

    The variable's rule (the C client's, clients/c/src/env.c resolve_id, word for word):
    after `str.strip`, ASCII digits 0-9 only, below 2**64. No sign, no ``_``, no other
    script's digits (all of which `int` takes): a launcher writes plain digits, and
    anything else is a typo or another tool's value, refused naming the variable and
    its value (its repr: what was there, blanks included)."""
    if value is not None:
        return _u64("simulation_id", value)
    text = os.environ.get(ENV_SIMULATION_ID)
    if text is None:
        raise ValueError(
            f"no simulation id: pass simulation_id=, or set {ENV_SIMULATION_ID}"
            f"{_worker_hint()}{_but(unknown_note())}"
        )
    digits = text.strip()
    if not (digits.isascii() and digits.isdigit()):
        raise ValueError(
            f"{ENV_SIMULATION_ID}={text!r} is not a simulation id: give a whole number "
            f"in ASCII digits 0-9, e.g. {ENV_SIMULATION_ID}=42"
        )
    significant = digits.lstrip("0") or "0"  # (int's 4300-digit limit: zeros aside)
    if len(significant) > 20 or int(significant) >= protocol.U64_LIMIT:
        raise ValueError(f"{ENV_SIMULATION_ID}={text!r} is out of range [0, 2**64)")
    return int(significant)


def check_attempt() -> int:
    """``$MELISSA_TRAINER_ATTEMPT``, the launcher's count of this simulation's launches
    (0 the first), or -1 when unset or blank (not launched by it).

    The rule (the C client's, clients/c/src/rerun.c mt_check_attempt, word for word): after
    `str.strip`, ASCII digits 0-9 only, below 2**31. Anything else is refused naming the
    variable and its value: read as unset it made a rerun send every step again, read as
    set it made a solver started by hand skip its replay window and admission.

    Raises:
        ValueError: the variable is set to something else.
    """
    text = os.environ.get(ENV_ATTEMPT)
    if text is None or not text.strip():
        return -1
    digits = text.strip()
    number = digits.isascii() and digits.isdigit() and len(digits.lstrip("0")) <= 10
    if not number or int(digits) >= 2**31:
        raise ValueError(
            f"{ENV_ATTEMPT}={text!r} is not an attempt number: the launcher sets it (0 at a "
            "simulation's first launch, 1 at its first restart), in ASCII digits 0-9 below "
            "2**31; unset it to start the solver by hand"
        )
    return int(digits)


def check_time_step(value: Any) -> int:
    """`value` as a u64 time step (any index-like integer)."""
    return _u64("time_step", value)


def _u64(name: str, value: Any) -> int:
    """`value` as an integer in [0, 2**64) (a u64 on the wire), or ValueError naming `name`."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, not {value!r}")
    try:
        number = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, not {value!r}") from None
    if not 0 <= number < protocol.U64_LIMIT:
        raise ValueError(f"{name}={number} is out of range [0, 2**64)")
    return number
