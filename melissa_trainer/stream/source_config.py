"""What a `StreamSource` derives of its `ReceiverConfig` for each rank: its bind, an
explicit TCP port offset by the rank (`rank_bind`, at `StreamSource.start`). (What it
fills in and checks of the config, the study's parameter order: `config_fill`.)"""

from __future__ import annotations

__all__ = ["rank_bind"]


def rank_bind(bind: str, rank: int) -> str:
    """Offset an explicit TCP port by the rank, so that ranks on one host do not clash."""
    if rank == 0 or not bind.startswith("tcp://"):
        return bind
    host, _, port = bind.rpartition(":")
    if not port.isdigit() or int(port) == 0:
        return bind
    return f"{host}:{int(port) + rank}"
