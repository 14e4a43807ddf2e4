"""The replay window's contract (`melissa_trainer.client.replay`): the last steps within
`max_bytes`, oldest overwritten first, copies (the caller may write into its arrays),
each field in the shape it was given, and a step too big for the window never kept."""

from __future__ import annotations

import numpy as np
import pytest

from melissa_trainer.client.replay import ReplayWindow


def test_it_keeps_the_last_steps_within_its_bytes_oldest_overwritten_first() -> None:
    window = ReplayWindow(3 * 12)  # three steps of one 3-float32 field
    arrays = [np.full(3, t, "<f4") for t in range(5)]
    for t, a in enumerate(arrays):
        window.record(t, {"u": a})
        a[:] = -1  # (the caller writes into its array: the window holds a copy)
    assert [t for t in range(5) if t in window] == [2, 3, 4]
    assert len(window) == 3 and window.dropped == 2 and window.nbytes == 36
    for t in (2, 3, 4):
        assert np.array_equal(window[t]["u"], np.full(3, t, "<f4"))


def test_a_step_sent_again_replaces_its_copy_without_evicting() -> None:
    window = ReplayWindow(2 * 8)
    window.record(0, {"u": np.zeros(2, "<f4")})
    window.record(1, {"u": np.ones(2, "<f4")})
    window.record(0, {"u": np.full(2, 7, "<f4")})
    assert 0 in window and 1 in window and window.dropped == 0
    assert window[0]["u"].tolist() == [7, 7]


def test_fields_come_back_in_the_shape_and_values_given() -> None:
    window = ReplayWindow(1 << 10)
    window.record(0, {"a": np.ones((2, 3)), "s": 1.5})
    window.record(1, {"a": np.arange(6.0).reshape(3, 2), "s": np.float64(2.5)})  # (an MPI part)
    window.record(2, {"a": np.arange(6.0).reshape(2, 3).T, "s": 3.5})  # (not C-ordered)
    assert window[0]["a"].shape == (2, 3) and float(window[0]["s"]) == 1.5
    assert window[1]["a"].tolist() == [[0, 1], [2, 3], [4, 5]] and float(window[1]["s"]) == 2.5
    assert np.array_equal(window[2]["a"], np.arange(6.0).reshape(2, 3).T)


def test_a_step_bigger_than_the_window_is_not_kept() -> None:
    window = ReplayWindow(8)
    window.record(0, {"u": np.zeros(4, "<f4")})
    assert 0 not in window and window.dropped == 1 and window.nbytes == 0


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_bytes > 0"):
        ReplayWindow(0)


def test_the_window_is_on_by_default_in_external_mode_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from melissa_trainer.client.config import replay_bytes_for
    from melissa_trainer.client.tuning import DEFAULT_REPLAY_BYTES, ClientTuning

    for name in ("MELISSA_TRAINER_REPLAY_BYTES", "MELISSA_TRAINER_ATTEMPT"):
        monkeypatch.delenv(name, raising=False)
    tuning = ClientTuning()
    assert replay_bytes_for(tuning, "out/rendezvous") == DEFAULT_REPLAY_BYTES  # external
    assert replay_bytes_for(tuning, None) == 0  # endpoints given
    monkeypatch.setenv("MELISSA_TRAINER_ATTEMPT", "0")  # launched: the launcher reruns it
    assert replay_bytes_for(tuning, "out/rendezvous") == 0
    monkeypatch.setenv("MELISSA_TRAINER_REPLAY_BYTES", "4096")
    assert replay_bytes_for(tuning, "out/rendezvous") == 4096
    assert replay_bytes_for(ClientTuning(replay_bytes=0), "out/rendezvous") == 0
    monkeypatch.setenv("MELISSA_TRAINER_REPLAY_BYTES", "lots")
    with pytest.raises(ValueError, match="MELISSA_TRAINER_REPLAY_BYTES='lots'"):
        replay_bytes_for(tuning, "out/rendezvous")
    with pytest.raises(ValueError, match="replay_bytes"):
        ClientTuning(replay_bytes=-1)
