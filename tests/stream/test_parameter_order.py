"""A sample's ``parameters`` vector is in the study's order, whatever order a solver
lists its parameter names in its HELLO (`StudySchema.arrange`, `Ingest.hello`).

The study's names given (``ReceiverConfig(parameters=...)``, a `Study`'s sampler's): a
HELLO listing them in another order is admitted and its vector built in the given
order; no names given: the first admitted HELLO's order is the study's, and a HELLO
listing the same names in another order is refused, naming both orders.

Oracles: the value each name was sent with (a HELLO written by `reference_protocol`,
from the protocol document, not the library's encoder, decoded by the receiver's own
`DataDecoder`), and the held-out CSV written from those samples (the column named
``alpha`` holds the value sent as ``alpha``); end to end, real Python client processes
into a real `Receiver` (the C client's: tests/c/test_c_parameter_order.py).
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import reference_protocol as R
from helpers import drain, running

from melissa_trainer.buffers import FIFOBuffer, Sample
from melissa_trainer.stream.data_decoder import DataDecoder
from melissa_trainer.stream.ingest import Ingest
from melissa_trainer.stream.reshard import reshard_states
from melissa_trainer.trainer.held_out import HeldOutLosses
from melissa_trainer.wire import Batch, Data, Hello

pytestmark = pytest.mark.timeout(60)

U = R.Field("u", "<f8", (4,))
NAMES = ("alpha", "beta")  # the study's order (its sampler's names)


def _ingest(
    samples: list[Sample], parameters: tuple[str, ...] | None, rank: int = 0, world: int = 1
) -> Ingest:
    def keep(sample: Sample) -> bool:
        samples.append(sample)
        return True

    return Ingest(
        rank,
        world,
        put=keep,
        end=lambda why: None,
        expected=None,
        max_field_bytes=1 << 20,
        max_pending=64,
        max_pending_bytes=1 << 24,
        max_time_step=64,
        recent_size=64,
        parameters=parameters,
    )


def _send(ingest: Ingest, frame: bytes) -> None:
    msg = DataDecoder(1 << 30)(frame, None)
    if type(msg) is Data:
        ingest.data(msg, True)
    elif type(msg) is Batch:
        ingest.batch(msg)
    else:
        assert type(msg) is Hello
        ingest.hello(msg)


def _hello(sid: int, parameters: dict[str, float]) -> bytes:
    return R.encode_hello(sid, 0, 1, R.hello_body([U], parameters))


def _data(sid: int, t: int) -> bytes:
    head = R.part_header(R.DATA, sid, t, 0, 1, U, 0, U.size, True, True)
    return head + np.full(U.size, float(t)).tobytes()


def _batch(sid: int, steps: list[int]) -> bytes:
    head = R.part_header(R.BATCH, sid, len(steps), 0, 1, U, 0, U.size, False, True)
    return head + b"".join(t.to_bytes(8, "little") + np.full(4, float(t)).tobytes() for t in steps)


def _vectors(samples: list[Sample]) -> dict[int, list[list[float]]]:
    out: dict[int, list[list[float]]] = {}
    for s in samples:
        out.setdefault(int(s["simulation_id"]), []).append(np.asarray(s["parameters"]).tolist())
    return out


#: simulation id -> the parameters its solver sends, in the order it lists them
SENT = {
    7: {"beta": 2.0, "alpha": 1.0},  # another order than the study's
    8: {"alpha": 3.0, "beta": 4.0},  # the control: the study's order
}


def _stream(ingest: Ingest) -> None:
    for sid, parameters in SENT.items():
        _send(ingest, _hello(sid, parameters))
        _send(ingest, _data(sid, 0))  # a DATA (the one-field fast path)
        _send(ingest, _batch(sid, [1, 2]))  # a BATCH (a block of samples)


def test_every_sample_lists_the_parameters_in_the_studys_order() -> None:
    samples: list[Sample] = []
    ingest = _ingest(samples, NAMES)
    _stream(ingest)
    assert ingest.refused == [] and ingest.rejected["schema_mismatch"] == 0
    expected = {sid: [[sent[n] for n in NAMES]] * 3 for sid, sent in SENT.items()}
    assert _vectors(samples) == expected  # 7: [1.0, 2.0], not the HELLO's [2.0, 1.0]


def test_the_held_out_csv_names_each_value_as_it_was_sent(tmp_path: Path) -> None:
    samples: list[Sample] = []
    _stream(_ingest(samples, NAMES))
    firsts = {int(s["simulation_id"]): s for s in reversed(samples)}  # each one's first
    held = HeldOutLosses.of(10, [7, 8], [0.5, 0.25], [firsts[7], firsts[8]], NAMES)
    path = tmp_path / "held_out_losses.csv"
    held.write(path)
    with path.open(newline="") as file:
        rows = {int(r["simulation_id"]): r for r in csv.DictReader(file)}
    for sid, sent in SENT.items():
        assert {n: float(rows[sid][n]) for n in NAMES} == sent
    assert held.worst == (7, 0.5, SENT[7])


def test_with_no_names_given_the_first_order_is_the_studys_and_another_is_refused() -> None:
    samples: list[Sample] = []
    ingest = _ingest(samples, None)
    _send(ingest, _hello(8, SENT[8]))  # the first: alpha, beta
    _send(ingest, _hello(7, SENT[7]))  # the same names, another order: refused
    _send(ingest, _data(7, 0))
    _send(ingest, _hello(9, {"beta": 6.0, "gamma": 5.0}))  # other names: no rule, as before
    _send(ingest, _data(9, 0))
    assert [sid for sid, _ in ingest.refused] == [7] and samples[0]["simulation_id"] == 9
    why = ingest.refused[0][1]
    assert why.startswith(
        "HELLO lists its parameters in the order ['beta', 'alpha'], the study's first "
        "simulation listed them ['alpha', 'beta']"
    )
    assert "ReceiverConfig(parameters=['alpha', 'beta'])" in why
    assert np.asarray(samples[0]["parameters"]).tolist() == [6.0, 5.0]  # its own order

    # the order learned survives a checkpoint, and a resume on another number of ranks:
    # each resumed receiver refuses the same HELLO
    state = json.loads(json.dumps(ingest.state_dict(), sort_keys=True))
    resumed = _ingest([], None)
    resumed.load_state_dict(state, buffer_put=ingest.samples_put)
    records = [reshard_states([state], [ingest.samples_put], r, 2, 0) for r in (0, 1)]
    resized = []
    for rank, record in enumerate(records):
        resized.append(_ingest([], None, rank, 2))
        resized[-1].load_state_dict(record, buffer_put=0)
    for receiver in (resumed, *resized):
        _send(receiver, _hello(7, SENT[7]))
        assert [sid for sid, _ in receiver.refused] == [7]


def test_a_ledger_of_an_older_checkpoint_is_given_the_studys_order() -> None:
    """A record written before the fix holds simulation 7's parameters in its HELLO's
    order: the resumed receiver, given the names, builds its vector in their order."""
    before: list[Sample] = []
    old = _ingest(before, None)
    _send(old, _hello(7, SENT[7]))
    _send(old, _data(7, 0))
    state = json.loads(json.dumps(old.state_dict(), sort_keys=True))
    assert state["simulations"]["7"]["parameters"] == [["beta", 2.0], ["alpha", 1.0]]
    state.pop("parameter_order", None)  # (absent from older records)
    after: list[Sample] = []
    resumed = _ingest(after, NAMES)
    resumed.load_state_dict(state, buffer_put=old.samples_put)
    _send(resumed, _data(7, 1))  # no HELLO again (a following client)
    assert [np.asarray(s["parameters"]).tolist() for s in after] == [[1.0, 2.0]]


CLIENT = """
import json, sys
import numpy as np
from melissa_trainer.client import Client
sid, endpoint, parameters = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
with Client({"u": ((4,), "<f8")}, parameters=parameters, simulation_id=sid,
            endpoints=[endpoint]) as c:
    for t in range(2):
        c.send(t, u=np.full(4, float(t)))
"""


@pytest.mark.e2e
def test_python_clients_in_either_order_into_a_real_receiver() -> None:
    """Real client processes, over ZeroMQ, each listing the names its own way."""
    buffer = FIFOBuffer(100)
    with running(buffer, expected_simulations=2, parameters=NAMES) as rec:
        for sid, sent in SENT.items():
            args = [str(sid), str(rec.endpoint), json.dumps(sent)]
            proc = subprocess.run(
                [sys.executable, "-c", CLIENT, *args], capture_output=True, text=True, timeout=50
            )
            assert proc.returncode == 0, proc.stderr
        samples = drain(buffer)
    expected = {sid: [[sent[n] for n in NAMES]] * 2 for sid, sent in SENT.items()}
    assert _vectors(samples) == expected
