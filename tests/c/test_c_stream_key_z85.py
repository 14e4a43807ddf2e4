"""The C client's `MELISSA_TRAINER_KEY` was checked for its length only (env.c): a
40-character key with a character outside Z85 made `mt_client_start` fail with libzmq's
bare "Invalid argument", and one whose 5-character groups overflow a 32-bit word was
taken as some other key. Now `MT_EENV` at start, with the Python client's message word
for word (tests/client/test_env_key_z85.py; env.c mt_z85_fault). Failed before."""

from __future__ import annotations

from pathlib import Path

import pytest
import zmq
from c_driver import run_script, script_exe  # noqa: F401 (a fixture)
from compiled import c_client  # noqa: F401 (a fixture)

from melissa_trainer.client import Client

pytestmark = [
    pytest.mark.e2e,  # a compiled driver
    pytest.mark.skipif(not zmq.has("curve"), reason="pyzmq's libzmq was built without CURVE"),
]

MT_EENV = 6
#: (as tests/client/test_env_key_z85.py's) one character outside Z85, groups over 2**32
OUTSIDE = 'rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf"'
OVERFLOW = "#" * 40
ENDPOINT = "tcp://127.0.0.1:9"


@pytest.mark.timeout(120)
@pytest.mark.parametrize("key", [OUTSIDE, OVERFLOW, "not-a-key"])
def test_a_c_env_key_that_is_not_z85_is_refused_in_the_python_clients_words(
    script_exe: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    key: str,
) -> None:
    env = {"MELISSA_TRAINER_ENDPOINTS": ENDPOINT, "MELISSA_TRAINER_KEY": key}
    result = run_script(script_exe, "id 6\nfield u 1 1 4\nstart\n", tmp_path, env)
    code, message = result[max(result)]  # (the start's)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError) as python_error:
        Client({"u": ((4,), "float32")}, simulation_id=6)
    assert (code, message) == (MT_EENV, str(python_error.value))
