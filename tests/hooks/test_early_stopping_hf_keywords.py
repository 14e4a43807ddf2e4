"""`EarlyStoppingHook` given Hugging Face ``EarlyStoppingCallback``'s keywords, as a
ported script writes them: a TypeError naming what to write here (before: Python's bare
"unexpected keyword argument 'early_stopping_patience'", htrial46)."""

from __future__ import annotations

import pytest

from melissa_trainer.hooks.early_stopping import EarlyStoppingHook

pytestmark = pytest.mark.timeout(30)


def test_hf_patience_keyword_names_patience() -> None:
    with pytest.raises(TypeError, match=r"early_stopping_patience= is patience= here"):
        EarlyStoppingHook(early_stopping_patience=3)  # type: ignore[call-arg]


def test_hf_threshold_keyword_says_there_is_none() -> None:
    with pytest.raises(TypeError, match=r"early_stopping_threshold= has no equivalent"):
        EarlyStoppingHook(patience=3, early_stopping_threshold=0.01)  # type: ignore[call-arg]


def test_both_keywords_are_named_in_one_error() -> None:
    with pytest.raises(TypeError) as info:
        EarlyStoppingHook(early_stopping_patience=2, early_stopping_threshold=0.1)  # type: ignore[call-arg]
    assert "early_stopping_patience=" in str(info.value)
    assert "early_stopping_threshold=" in str(info.value)


def test_patience_still_works_and_other_mistakes_keep_pythons_words() -> None:
    assert EarlyStoppingHook(3).patience == 3
    assert EarlyStoppingHook(patience=2).patience == 2
    with pytest.raises(TypeError, match="unexpected keyword argument 'patiance'"):
        EarlyStoppingHook(patiance=3)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="patience must be >= 1"):
        EarlyStoppingHook(0)
