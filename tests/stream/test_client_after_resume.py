"""The client library a simulation's HELLO names (`Ingest.client_of`: the launcher's
start-up advice depends on it) is known again after a resume: the ledger loaded from a
checkpoint knows none, and the resumed attempt's HELLO, which names it, used to be taken
without it (trial F2: a C solver's resumed run was given the Python client's advice)."""

from __future__ import annotations

import json

import numpy as np
from small_ingest import small_ingest

from melissa_trainer.wire import Data, FieldSpec, Hello

FIELD = FieldSpec("u", np.dtype("<f4"), (2,))


def test_the_resumed_attempts_hello_names_its_client_again() -> None:
    first = small_ingest()
    first.hello(Hello(3, 0, 1, (FIELD,), {"a": 1.0}, client="c"))
    payload = np.zeros(2, np.float32).tobytes()
    first.data(Data(3, 0, 0, 1, "u", FIELD.dtype, FIELD.shape, 0, 2, payload), True)
    assert first.client_of(3) == "c"
    state = json.loads(json.dumps(first.state_dict()))
    resumed = small_ingest()
    resumed.load_state_dict(state, buffer_put=1)
    assert resumed.client_of(3) is None  # (not in the checkpoint: the HELLO says it)
    resumed.hello(Hello(3, 0, 1, (FIELD,), {"a": 1.0}, client="c"))
    assert resumed.client_of(3) == "c"
    resumed.hello(Hello(3, 0, 1, (FIELD,), {"a": 1.0}))  # an older client says nothing
    assert resumed.client_of(3) == "c"
