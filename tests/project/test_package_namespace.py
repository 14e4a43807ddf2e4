"""`dir(melissa_trainer)` (what an IDE or ``help()`` offers) lists the public API: the
names of `__all__`, the package's subpackages already imported and its dunders, not
the helpers its ``__init__`` imports for itself (`Any`, `TYPE_CHECKING`,
`annotations`, `importlib`, `_moved`). Before, it listed them. ``from melissa_trainer
import *`` and the names reached lazily keep working, and every listed name resolves."""

from __future__ import annotations

import pytest

import melissa_trainer
import melissa_trainer.client  # noqa: F401 (a subpackage imported: listed)

pytestmark = pytest.mark.timeout(120)

HELPERS = {"Any", "TYPE_CHECKING", "annotations", "importlib", "ModuleType", "_moved"}


def test_dir_lists_the_public_api_and_no_helper_name() -> None:
    listed = dir(melissa_trainer)
    assert not HELPERS & set(listed), sorted(HELPERS & set(listed))
    assert set(melissa_trainer.__all__) <= set(listed)
    assert {"client", "__version__", "__all__", "__doc__"} <= set(listed)
    assert listed == sorted(listed)
    others = {n for n in listed if not n.startswith("__")} - set(melissa_trainer.__all__)
    for name in others:  # only subpackages besides the API
        assert getattr(melissa_trainer, name).__name__ == f"melissa_trainer.{name}", name


def test_every_listed_name_resolves_and_star_import_gives_all() -> None:
    assert [n for n in dir(melissa_trainer) if not hasattr(melissa_trainer, n)] == []
    namespace: dict[str, object] = {}
    exec("from melissa_trainer import *", namespace)
    namespace.pop("__builtins__")
    assert sorted(namespace) == sorted(melissa_trainer.__all__)
    assert namespace["OnlineTrainer"] is melissa_trainer.OnlineTrainer
