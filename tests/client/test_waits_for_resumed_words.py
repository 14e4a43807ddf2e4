"""What a close waits for when the trainer was preempted (its stop record says so: a
resume may come), in both clients' words: `gave_up.waits_for(resumed=True)` says "for the
trainer to be resumed (--resume_from_checkpoint latest) and publish in DIR" where a
trainer that died is "a restarted trainer". The C client's mt_waits_for (close_notice.c)
had only the second: a C close to a preempted trainer named its stop record, then waited
for "a restarted trainer". These are the texts clients/c/tests/unit_close_notice.c pins
for the same inputs (the Python ones, their setters translated: `close_words.c_words`)."""

from __future__ import annotations

import pytest
from close_words import c_words

from melissa_trainer.client.gave_up import waits_for

#: (follow_timeout, resumed) -> the C words (left 2 s, 3 s elapsed, a follow in /rv)
CASES = [
    (4.0, True,
     "The close waits up to 2 s more for it to reconnect (mt_set_disconnected_timeout=2.0 "
     "s), then up to 4 s (mt_set_follow_timeout=4.0 s) for the trainer to be resumed "
     "(--resume_from_checkpoint latest) and publish in /rv, and follows it (at once if it "
     "publishes sooner): up to 6 s more, 9 s in all. mt_set_disconnected_timeout and "
     "mt_set_follow_timeout shorten it; nothing more is said until the close ends."),
    (None, True,
     "The close waits up to 2 s more for it to reconnect (mt_set_disconnected_timeout=2.0 "
     "s), then for the trainer to be resumed (--resume_from_checkpoint latest) and "
     "publish in /rv, with no bound (mt_set_follow_timeout < 0), and follows it (at once "
     "if it publishes sooner). mt_set_disconnected_timeout and mt_set_follow_timeout "
     "shorten it; nothing more is said until the close ends."),
    (4.0, False,
     "The close waits up to 2 s more for it to reconnect (mt_set_disconnected_timeout=2.0 "
     "s), then up to 4 s (mt_set_follow_timeout=4.0 s) for a restarted trainer to publish "
     "in /rv, and follows it (at once if it publishes sooner): up to 6 s more, 9 s in "
     "all. mt_set_disconnected_timeout and mt_set_follow_timeout shorten it; nothing more "
     "is said until the close ends."),
]  # fmt: skip


@pytest.mark.timeout(30)
@pytest.mark.parametrize(("follow", "resumed", "want"), CASES)
def test_the_python_waits_for_in_c_words_is_the_c_text(
    follow: float | None, resumed: bool, want: str
) -> None:
    said = waits_for(
        2.0, "ClientTuning.disconnected_timeout=2.0 s", "reconnect", "/rv", True, follow, 3.0,
        resumed=resumed,
    )  # fmt: skip
    assert c_words(said) == want
