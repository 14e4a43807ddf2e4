"""docs/concepts/study.md, "Reading its result" (the surrogate acquisition): the line it
quotes is the shape of the account's sampler line (`sampler_line`), and the counts it
names for a user's own code are the sampler's attributes, related as the page says
(htrial49: the page quoted no line of the surrogate acquisition's account, nor where a
study of one's own reads the counts)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from melissa_trainer.launcher import make_sampler
from melissa_trainer.launcher.sampler_account import sampler_line

PAGE = Path(__file__).parents[2] / "docs" / "concepts" / "study.md"


def quoted_line() -> str:
    """The page's quoted account line, its wrapping undone."""
    text = PAGE.read_text()
    start = text.index("**Reading its result.**")
    found = re.search(r"`(adaptive sampler: [^`]+)`", text[start:])
    assert found, "the page quotes no 'adaptive sampler: ...' line"
    return " ".join(found.group(1).split())


@pytest.mark.timeout(60)
def test_the_quoted_line_is_the_accounts_shape_and_its_counts_the_samplers() -> None:
    quoted = quoted_line()
    # the shape: the quote with its numbers as any numbers
    shape = re.escape(quoted)
    shape = re.sub(r"\d+", r"\\d+", shape)
    sampler = make_sampler("surrogate", {"k": (0.0, 1.0), "c": (0.3, 0.7)}, seed=7)
    for i in range(20):
        drawn = sampler.draw()
        sampler.observe(i, drawn, loss=1.0 + 5.0 * drawn["k"] ** 4)
    line = sampler_line(sampler)
    assert line is not None and re.fullmatch(shape, line), (line, quoted)
    draws, explored, chosen, observed, kept, held = map(int, re.findall(r"\d+", line))
    assert draws == sampler.position == explored + chosen
    assert explored == sampler.explored and held == sampler.observed_at_draw == 19
    assert observed == len(sampler.observations) == 20 and kept == sampler.window
    # the draws that held `min_observations` losses: every one after the first 8
    assert sampler.adaptive_draws == draws - 8 and chosen > 0
    # the page's own counts add up the same way
    q_draws, q_explored, q_chosen, q_observed, _, q_held = map(int, re.findall(r"\d+", quoted))
    assert q_draws == q_explored + q_chosen and q_held <= q_observed <= q_draws
