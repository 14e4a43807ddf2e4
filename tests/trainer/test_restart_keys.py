"""A torchrun restart's process group forms on a store cleared of the failed attempt's
keys (melissa_trainer/trainer/restart_keys.py): torch 2.13 forms the default group under
the same ``default_pg/`` keys at every attempt, in the launcher's store that outlives a
restart, so a restarted rank could read its peer's gloo address of the failed attempt
("Connection refused", the restart lost: 2 of 5 one-node restarts by hand before).

The oracle: the store's own keys, read back with `list_keys` on a real ``TCPStore``."""

from __future__ import annotations

import datetime
import threading

import pytest
import torch.distributed as dist

from melissa_trainer.trainer.restart_keys import clear, clear_failed_attempt, cleared_key

pytestmark = pytest.mark.timeout(60)

#: keys a failed attempt left (as listed in the launcher's store after a restart)
STALE = ["default_pg/0//cpu//0/0", "default_pg/0//cpu//0/1"]
#: keys of others that must stay (torch elastic's own; the refusal mark's)
KEPT = ["none/torchelastic/role_info/0", "melissa_trainer/after_train/x/gone/0"]


def store_with_leftovers() -> dist.TCPStore:
    server = dist.TCPStore("127.0.0.1", 0, None, True, timeout=datetime.timedelta(seconds=30))
    for key in STALE + KEPT:
        server.set(key, "x")
    return server


def client_of(server: dist.TCPStore) -> dist.TCPStore:
    return dist.TCPStore(
        "127.0.0.1", server.port, None, False, timeout=datetime.timedelta(seconds=30)
    )


def test_rank_0_clears_the_group_keys_and_the_other_rank_forms_after_it() -> None:
    server = store_with_leftovers()
    done = threading.Event()
    failed: list[BaseException] = []

    def rank_1() -> None:
        try:
            clear(client_of(server), attempt=1, rank=1, wait=30)
        except BaseException as error:  # (said below, on the test's thread)
            failed.append(error)
        done.set()

    waiter = threading.Thread(target=rank_1, daemon=True)
    waiter.start()
    assert not done.is_set() and not server.check([cleared_key(1)])
    clear(client_of(server), attempt=1, rank=0)
    assert done.wait(30) and not failed, failed
    keys = set(server.list_keys())
    assert not keys & set(STALE), keys
    assert set(KEPT) <= keys and cleared_key(1) in keys


def test_a_rank_whose_rank_0_never_clears_says_so() -> None:
    server = store_with_leftovers()
    with pytest.raises(RuntimeError):  # (torch's DistStoreError: a wait timed out)
        clear(client_of(server), attempt=2, rank=1, wait=0.5)
    assert set(STALE) <= set(server.list_keys())


@pytest.mark.parametrize("attempt", ["0", None])
def test_a_first_attempt_or_no_agent_store_touches_nothing(
    monkeypatch: pytest.MonkeyPatch, attempt: str | None
) -> None:
    server = store_with_leftovers()
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(server.port))
    if attempt is None:  # a restart, but not under torch elastic's agent store
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
        monkeypatch.delenv("TORCHELASTIC_USE_AGENT_STORE", raising=False)
    else:
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", attempt)
        monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")
    clear_failed_attempt()
    assert set(server.list_keys()) == set(STALE + KEPT)


def test_a_restart_under_the_agent_store_is_cleared_by_rank_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = store_with_leftovers()
    for name, value in {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(server.port), "TORCHELASTIC_RESTART_COUNT": "1",
                        "TORCHELASTIC_USE_AGENT_STORE": "True"}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    clear_failed_attempt()
    assert set(server.list_keys()) == set(KEPT) | {cleared_key(1)}
