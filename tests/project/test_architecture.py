"""Facts about the package's structure, checked on its source (issue 32, item 5).

* No import cycle: the graph of imports between the package's modules (parsed with
  `ast`: module-level and function-level imports, relative ones resolved; those under
  ``if TYPE_CHECKING:`` do not run and are left out) has no cycle, and every module
  imports alone (first, in a fresh interpreter state).
* No module reaches another's private attributes: ``obj._name`` with `obj` not
  ``self`` / ``cls`` and ``_name`` not defined in the same module, ``getattr`` /
  ``setattr`` with such a name, ``from module import _name``, and a private module
  (``pkg._mod``) imported from outside its package.
* The packages that promise no torch import with torch blocked.
* The layers (`LAYERS`): each package imports only its own layer and those below it,
  type-only imports (``if TYPE_CHECKING:``) included; no module at the package root but
  the public API (``__init__``), the old import paths (``_moved``) and the entry points.

The checkers are in tests/project/architecture_checks.py; each is also run on a small
package written for the purpose that breaks its rule
(tests/project/test_architecture_checkers.py), so that a checker that cannot fail is
caught.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from architecture_checks import (
    Module,
    back_edges,
    import_cycles,
    imports,
    layer_of,
    modules,
    private_reaches,
)
from import_first import import_each_first

import melissa_trainer

PACKAGE_DIR = Path(melissa_trainer.__file__).parent
PACKAGE = "melissa_trainer"

# Known violations of the private-attribute rule, (file relative to the package,
# attribute). Each entry must still occur (a stale entry fails the test too, so the list
# only shrinks). Accelerate's registered objects have no public view: their classes are
# recorded and checked before a resume (Accelerate's own check is a bare count, after the
# model is loaded).
ALLOWED_PRIVATE: set[tuple[str, str]] = {
    ("checkpoint/registered_objects.py", "_custom_objects"),
    # torch's: no public getter of a process group's timeout (`exit_meeting.group_timeout`)
    ("trainer/exit_meeting.py", "_get_backend"),
    ("trainer/exit_meeting.py", "_timeout"),
    # pyzmq's: no public view of a context's open sockets (its own `Context.destroy` reads
    # this set): `worker._end_context` does not term() a context a socket still holds
    ("client/worker_context.py", "_sockets"),
}

#: the package's layers, lowest first: a module of one imports only modules of its own
#: layer or of a lower one (type-only imports included); every layer below `core` is
#: torch-free (each promises it in `NO_IMPORT_PROMISES`). docs/concepts/architecture.md
#: draws this table.
LAYERS: tuple[str, ...] = (
    "common",  # argument checks, JSON output, record migrations
    "wire",  # the protocol shared by client and receiver
    "buffers",  # where samples wait to be trained on
    "config",  # TrainingArguments, its parser, configuration files
    "sources",  # what fills a buffer (the Source interface)
    "stream",  # the receiver side: sockets, ingest, rendezvous
    "client",  # the simulation side
    "launcher",  # simulation ensembles: samplers, backends, supervision
    "core",  # one training step: state, dataset, staging, stop flag, loss guard
    "hooks",  # the loop's events and the hooks that act on them
    "checkpoint",  # checkpoint directories, manifest, registry of parts, reshard
    "study",  # a launcher's simulations as the trainer's source
    "trainer",  # OnlineTrainer: the loop, its checkpoints, reports, preemption
)
#: the modules at the package root (above every layer: they may import any)
ROOT_MODULES = {
    "melissa_trainer",
    "melissa_trainer._moved",
    "melissa_trainer.build_c_client",
    "melissa_trainer.lineage",  # `python -m melissa_trainer.lineage check`
}


#: which packages (or modules) promise not to load which top-level packages
#: (`melissa_trainer.stream` and `.client`: their `__init__` docstrings and the README;
#: `client.worker`: its module docstring and the client's `__init__`, standard library
#: and pyzmq)
NO_IMPORT_PROMISES: dict[str, tuple[str, ...]] = {
    **{
        f"melissa_trainer.{layer}": ("torch", "accelerate")
        for layer in LAYERS[: LAYERS.index("core")]
    },
    "melissa_trainer.client": ("torch", "accelerate"),
    "melissa_trainer.client.worker": ("torch", "accelerate", "numpy", "scipy"),
    # scipy.stats (~1 s of CPU) only when a quasi-random engine is built (`qmc_engine`):
    # not in every trainer process that imports the samplers
    "melissa_trainer.launcher": ("scipy",),
}


def describe_cycle(cycle: list[str], known: dict[str, Module]) -> str:
    steps = []
    for a, b in zip(cycle, cycle[1:], strict=False):
        line = imports(known[a], known)[b]
        steps.append(f"{a} (line {line}) -> {b}")
    return "; ".join(steps)


# -- the facts --------------------------------------------------------------------------


@pytest.mark.timeout(60)
def test_import_graph_has_no_cycle() -> None:
    known = modules(PACKAGE_DIR, PACKAGE)
    cycles = import_cycles(known)
    assert not cycles, "import cycles:\n" + "\n".join(describe_cycle(c, known) for c in cycles)


@pytest.mark.timeout(60)
def test_no_layer_imports_a_higher_one() -> None:
    known = modules(PACKAGE_DIR, PACKAGE)
    edges, homeless = back_edges(known, PACKAGE, LAYERS)
    assert not homeless, f"modules in no layer (add them to LAYERS or move them): {homeless}"
    assert not edges, "imports of a higher layer:\n" + "\n".join(edges)
    at_root = {n for n, m in known.items() if layer_of(m, PACKAGE, LAYERS) == len(LAYERS)}
    assert at_root == ROOT_MODULES, "the package root holds only the API and entry points"


@pytest.mark.e2e
@pytest.mark.timeout(1800)
def test_every_module_imports_alone() -> None:
    """Each module imported first (the package forgotten before each): an import cycle
    that only works in one order, or a module that needs another imported before it,
    fails here. About 25 CPU-s for ~400 modules (each source compiled once: 90 CPU-s when
    each import recompiled them, `import_first.IMPORT_EACH`): 48 s at load average 6 on 2
    cores; its old wall-clock bound (420 s) failed at load average ~20 and more. A hang is
    caught by the CPU time a module spends or the interpreter does not
    (`import_each_first`), whatever the load; the pytest timeout is a last resort (a
    2-core machine at load ~60)."""
    names = sorted(modules(PACKAGE_DIR, PACKAGE))
    failures = import_each_first(names, PACKAGE)
    assert not failures, "\n".join(f"{name}:\n{tb}" for name, tb in failures.items())


@pytest.mark.timeout(60)
def test_no_module_reaches_private_attributes_of_another() -> None:
    found = private_reaches(modules(PACKAGE_DIR, PACKAGE), PACKAGE_DIR)
    new = [f for f in found if (f[0], f[1]) not in ALLOWED_PRIVATE]
    assert not new, "private attributes reached from another module:\n" + "\n".join(
        f"{rel}:{line}: {what}" for rel, _, line, what in new
    )
    stale = ALLOWED_PRIVATE - {(rel, name) for rel, name, _, _ in found}
    assert not stale, f"no longer reached, remove from ALLOWED_PRIVATE: {sorted(stale)}"


@pytest.mark.e2e
@pytest.mark.timeout(600)
@pytest.mark.parametrize("promise", sorted(NO_IMPORT_PROMISES))
def test_packages_that_promise_no_torch_import_without_it(promise: str) -> None:
    """Every module of the package imports (first) with the excluded packages blocked.
    At most ~4 CPU-s (the launcher's 64 modules: 34 s at load average 20 on 2 cores); a
    hang is caught by CPU time (`import_each_first`), the pytest timeout is a last resort."""
    blocked = NO_IMPORT_PROMISES[promise]
    known = modules(PACKAGE_DIR, PACKAGE)
    names = sorted(n for n in known if n == promise or n.startswith(promise + "."))
    assert names, promise
    failures = import_each_first(names, PACKAGE, blocked)
    assert not failures, f"{promise} needs one of {blocked}:\n" + "\n".join(
        f"{name}:\n{tb}" for name, tb in failures.items()
    )
