"""`OnlineTrainer(..., callbacks=[...])` and Hugging Face Trainer's other keywords that
`OnlineTrainer` lacks: a TypeError naming the keyword to use (`config.hf_names`), where
Python would say only "unexpected keyword argument". No keyword is taken as an alias."""

from __future__ import annotations

from typing import Any, Self

from melissa_trainer.config.hf_names import refuse_hf_keywords

__all__ = ["RefusesHFKeywords"]


class RefusesHFKeywords:
    """A base of `OnlineTrainer` (through `TrainerActions`): checks the constructor's
    keywords before ``__init__`` runs, so that its signature stays the one type checkers
    read (a static checker flags ``callbacks=`` too). A subclass whose ``__init__`` takes
    the keyword, or ``**kwargs``, is left alone (`refuse_hf_keywords`)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        refuse_hf_keywords(cls, kwargs)
        return super().__new__(cls)
