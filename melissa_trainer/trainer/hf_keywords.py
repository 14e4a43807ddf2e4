"""`OnlineTrainer(..., callbacks=[...])` and Hugging Face Trainer's other keywords that
`OnlineTrainer` lacks: a TypeError naming the keyword to use (`config.hf_trainer_names`),
where Python would say only "unexpected keyword argument"; and Trainer's methods that it lacks
(`save_model`, `predict`, `add_callback`): an AttributeError naming what to use. No
keyword or method is taken as an alias."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from melissa_trainer.config.hf_trainer_names import hf_method_hint, refuse_hf_keywords

__all__ = ["RefusesHFKeywords"]


class RefusesHFKeywords:
    """A base of `OnlineTrainer` (through `TrainerActions`): checks the constructor's
    keywords before ``__init__`` runs, so that its signature stays the one type checkers
    read (a static checker flags ``callbacks=`` too). A subclass whose ``__init__`` takes
    the keyword, or ``**kwargs``, is left alone (`refuse_hf_keywords`)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        refuse_hf_keywords(cls, kwargs)
        return super().__new__(cls)

    if not TYPE_CHECKING:  # (seen by a type checker, any attribute would type-check)

        def __getattr__(self, name: str) -> Any:
            # (a missing attribute only) a Hugging Face Trainer method is named with what
            # to use here; any other name keeps Python's words, so hasattr and
            # getattr(..., default) behave as without this method
            hint = hf_method_hint(type(self), name)
            if hint is not None:
                raise AttributeError(hint)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
