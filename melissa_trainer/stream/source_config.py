"""What a `StreamSource` checks and derives of its `ReceiverConfig`: the study's
parameter order against the config's (`check_order`, at `StreamSource.fill_in`), and
each rank's bind, an explicit TCP port offset by the rank (`rank_bind`, at
`StreamSource.start`)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["check_order", "rank_bind"]


def rank_bind(bind: str, rank: int) -> str:
    """Offset an explicit TCP port by the rank, so that ranks on one host do not clash."""
    if rank == 0 or not bind.startswith("tcp://"):
        return bind
    host, _, port = bind.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return bind
    return f"{host}:{int(port) + rank}"


def check_order(given: Sequence[str] | None, names: Sequence[str] | None) -> None:
    """Refuse `given` (``ReceiverConfig.parameters``) when it lists `names` (a study's
    sampler's) in another order, naming both orders and the fix (`fill_in`). Other
    names are not this check's: each HELLO is checked against `given` at admission
    (`schema.StudySchema.admit`), as before."""
    if given is None or names is None or list(given) == list(names):
        return
    if sorted(given) != sorted(names):
        return
    raise ValueError(
        f"ReceiverConfig(parameters={list(given)}) lists the study's parameters in another "
        f"order than its sampler's names {list(names)}: each sample's parameters vector "
        f"would be in the first order, and a held-out sample built from sampler.draw() in "
        f"the second, so that the model reads one parameter as another. Give "
        f"ReceiverConfig(parameters={list(names)}), the sampler's order, or leave "
        f"parameters out: a Study gives its sampler's names"
    )
