"""A receiver that publishes its endpoint under a host name this machine resolves to
loopback only (``tcp://*:*`` publishes the host's name; /etc/hosts may map it to
127.0.0.1 or 127.0.1.1) says so once, at its start, with the fix
(`host_scope.loopback_name_notice`): before, the first to find out was a client on
another machine (`ReceiverUnreachable`, tests/stream/test_host_scope.py) or a user
wondering why a two-node study took no sample."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

from melissa_trainer.buffers import FIFOBuffer
from melissa_trainer.stream.receiver import Receiver
from melissa_trainer.stream.receiver_config import ReceiverConfig

pytestmark = pytest.mark.timeout(60)

#: names as a fake resolver answers them: loopback only; loopback and an address others reach
TABLE = {"trainer-node": ["127.0.0.1", "::1"], "gpu-login": ["127.0.1.1", "10.1.2.3"]}


def notices(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The WARNINGs that say a published name resolves to loopback."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "resolves to loopback only" in r.getMessage()
    ]


def started(tmp_path: Path, **config: object) -> str:
    """A real receiver started with `config`, then stopped: the endpoint it published."""
    receiver = Receiver(FIFOBuffer(8), config=ReceiverConfig(rendezvous_dir=tmp_path, **config))
    receiver.start()
    try:
        return receiver.endpoint
    finally:
        receiver.stop()


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process resolves the names of `TABLE` as it says (and no other)."""

    def resolve(name: str, *args: object, **kwargs: object) -> list[tuple[object, ...]]:
        if name not in TABLE:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0)) for a in TABLE[name]]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)


def test_a_name_resolved_to_loopback_is_warned_of_once_at_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, resolver: None
) -> None:
    caplog.set_level(logging.WARNING)
    endpoint = started(tmp_path, bind="tcp://127.0.0.1:*", advertise_host="trainer-node")
    assert endpoint.startswith("tcp://trainer-node:")
    said = notices(caplog)
    assert len(said) == 1, said
    assert said[0].startswith(f"receiver of rank 0: it publishes {endpoint}, whose host name")
    assert "(127.0.0.1, ::1: /etc/hosts?)" in said[0]
    assert "clients on other machines" in said[0] and "will not reach it" in said[0]
    assert "ReceiverConfig(advertise_host='ADDRESS')" in said[0]
    assert "--bind 'tcp://ADDRESS:*'" in said[0]
    assert "Fine for a study whose simulations all run on this machine" in said[0]


def test_an_address_or_a_name_others_reach_is_not_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, resolver: None
) -> None:
    caplog.set_level(logging.WARNING)
    started(tmp_path / "a", bind="tcp://127.0.0.1:*", advertise_host="gpu-login")
    started(tmp_path / "b")  # (the default: a loopback address, for one machine)
    started(tmp_path / "c", bind="tcp://127.0.0.1:*", advertise_host="unknown-host")
    assert notices(caplog) == []


def test_this_hosts_name_published_by_a_wildcard_bind(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The case itself, with this machine's resolver: ``tcp://*:*`` publishes the host's
    name; warned of if and only if this machine resolves it to loopback only."""
    caplog.set_level(logging.WARNING)
    endpoint = started(tmp_path, bind="tcp://*:*")
    assert endpoint.startswith(f"tcp://{socket.gethostname()}:")
    try:
        found = {str(i[4][0]) for i in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        found = set()
    loopback = bool(found) and all(a == "::1" or a.startswith("127.") for a in found)
    expected = 1 if loopback else 0  # (here: /etc/hosts maps it to 127.0.0.1)
    assert len(notices(caplog)) == expected, caplog.text
