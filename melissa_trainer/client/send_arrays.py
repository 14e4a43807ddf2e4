"""The arrays of one `Client.send`: checked against the declared fields, and placed
over the ranks of a communicator at the first send.

Nothing is sent before every array of a step has passed. Imports numpy only (never
mpi4py itself: a real communicator has loaded it): simulations need neither torch nor
accelerate.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from melissa_trainer.client.config import check_time_step
from melissa_trainer.client.field_part import FieldPart

__all__ = ["describe_fields", "place_parts", "prepare_arrays"]

Prepared = list[tuple[FieldPart, np.ndarray]]

#: a declaration's hash is compared across ranks (`place_parts`) in pieces of this many
#: bits, each with its square: a square times the number of ranks stays within int64 up
#: to 2**23 ranks
DECLARATION_BITS = 20
#: the pieces compared: 60 bits of the hash, about as strong as the C client's 62
#: (a chance of about 1e-18 that two different declarations pass)
DECLARATION_PIECES = 3


def prepare_arrays(
    fields: Mapping[str, FieldPart], given: Mapping[str, Any], rank: int | None
) -> Prepared:
    """Each declared field with its array of this send, C-contiguous and of the
    declared dtype (a big-endian array of the same type is converted).

    `rank` is None without a communicator (every array has the declared global shape);
    with one, this rank's part may have any shape, of the size placed at the first send.

    Raises:
        ValueError: a missing or unknown field, a wrong shape or size.
        TypeError: an array of another dtype.
    """
    if given.keys() != fields.keys():
        missing = [n for n in fields if n not in given]
        unknown = [n for n in given if n not in fields]
        raise ValueError(
            f"send needs exactly the declared fields {list(fields)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; unknown {unknown}" if unknown else "")
        )
    out = []
    whole = rank is None
    for name, f in fields.items():
        value = given[name]
        expected = f.spec.dtype
        if (  # the usual array: checked in a few identity and tuple comparisons
            whole
            and type(value) is np.ndarray
            and value.dtype is expected
            and value.shape == f.spec.shape
            and value.strides == f.c_strides
        ):
            out.append((f, value))
            continue
        arr = value if type(value) is np.ndarray else np.asarray(value)
        if arr.dtype != expected:
            if arr.dtype.newbyteorder("<") == expected and arr.dtype.byteorder == ">":
                arr = arr.astype(expected)  # same type, other byte order
            else:
                raise TypeError(
                    f"field {name!r}: dtype {arr.dtype}, expected {expected} (declared); "
                    f"convert it with .astype() if that is what you mean"
                )
        if whole:
            if arr.shape != f.spec.shape:
                raise ValueError(
                    f"field {name!r}: shape {arr.shape}, expected the declared global "
                    f"shape {f.spec.shape}"
                )
        elif f.local_size >= 0 and arr.size != f.local_size:
            raise ValueError(
                f"field {name!r}: {arr.size} elements on rank {rank}, but "
                f"{f.local_size} at the first send (a rank's part may not change size)"
            )
        if not arr.flags.c_contiguous:
            arr = np.ascontiguousarray(arr)
        out.append((f, arr))
    return out


def place_parts(
    fields: Mapping[str, FieldPart],
    given: Mapping[str, Any],
    time_step: Any,
    comm: Any,
    simulation_id: int,
    rank: int,
    ranks: int,
) -> Prepared:
    """The first send with a communicator: offsets by a scan over ranks (collective);
    each field part is placed (`FieldPart.place`) and the prepared arrays returned.

    Every rank takes part even if its own arrays are invalid, and all ranks raise
    together, so that a mistake on one rank does not leave the others hanging. So do
    ranks that declared different fields, a different number of them included (the
    count and a 60-bit hash of each rank's declaration are compared in a reduction of
    the same length on every rank, before any reduction of one entry per field): else
    each rank's HELLO would differ, the receiver would take the first to arrive and drop
    the others' data, and the simulation would end incomplete. What this misses: two
    different declarations of the same count and hash (a chance of about 1e-18).
    """
    # mpi4py's reductions sum by default; its module is named only when already loaded
    # (a real mpi4py communicator loaded it): importing it here would initialise MPI in
    # a process whose communicator is another binding's, or a stand-in (MPICH's
    # /dev/shm segment of that process then outlives it).
    mpi = sys.modules.get("mpi4py.MPI")
    op: dict[str, Any] = {"op": mpi.SUM} if mpi is not None else {}
    error: Exception | None = None
    prepared: Prepared = []
    try:
        check_time_step(time_step)
        prepared = prepare_arrays(fields, given, rank)
    except Exception as exc:  # raised below, once the other ranks know
        error = exc
    declared = describe_fields(fields)
    # First, a reduction of the same length on every rank: the field count and the
    # pieces of the declaration's hash, each followed by its square, then "this rank
    # failed". The reductions of the sizes below have one entry per field: ranks that
    # counted differently would pass buffers of different lengths, which MPI aborts the
    # whole job on ("Message truncated") before any rank can raise.
    compared = [len(fields), *_hash_pieces(declared)]
    failed = int(error is not None)
    mine = np.array([*(v for c in compared for v in (c, c * c)), failed], dtype=np.int64)
    agreed = np.zeros_like(mine)
    comm.Allreduce(mine, agreed, **op)
    if error is not None:
        raise error
    if agreed[-1]:
        raise ValueError(
            f"the first send failed its checks on {agreed[-1]} other rank(s); see the error there"
        )
    # a value is alike on every rank iff its sum is `ranks` times this rank's and so is
    # its square's: the sum of (v_r - v)**2 over the ranks is then 0 (so every rank
    # finds a difference, and all raise together)
    if (agreed[:-1] != ranks * mine[:-1]).any():
        raise ValueError(
            f"the ranks of the communicator declare different fields: this rank ({rank} of "
            f"{ranks}) declares {declared}. Give Client the same fields (names, order, "
            "global shapes, dtypes) on every rank: each rank sends its part of the same "
            "global fields (each rank's error names its own)"
        )
    local = np.array([arr.size for _, arr in prepared], dtype=np.int64)
    offsets = np.zeros_like(local)
    totals = np.zeros_like(local)
    comm.Exscan(local, offsets, **op)
    if rank == 0:
        offsets[:] = 0  # MPI leaves rank 0's result undefined
    comm.Allreduce(local, totals, **op)
    wrong = {
        f.spec.name: (int(total), f.spec.size)
        for f, total in zip(fields.values(), totals, strict=True)
        if total != f.spec.size
    }
    if wrong:
        raise ValueError(
            "the ranks' parts do not add up to the global fields: "
            + ", ".join(
                f"{k!r} has {got} elements, expected {exp}" for k, (got, exp) in wrong.items()
            )
        )
    for (f, arr), offset in zip(prepared, offsets, strict=True):
        f.place(simulation_id, rank, ranks, int(offset), arr.size)
    return prepared


def _hash_pieces(declared: str) -> list[int]:
    """`DECLARATION_PIECES` pieces of `DECLARATION_BITS` bits of a 64-bit hash of the
    declaration in words (BLAKE2b: the same on every rank and Python, unlike `hash`)."""
    digest = int.from_bytes(hashlib.blake2b(declared.encode(), digest_size=8).digest(), "little")
    mask = (1 << DECLARATION_BITS) - 1
    return [(digest >> (DECLARATION_BITS * i)) & mask for i in range(DECLARATION_PIECES)]


def describe_fields(fields: Mapping[str, FieldPart]) -> str:
    """The declaration in words, in its order: ``'u' float32 (4, 2), 'p' float64 ()``."""
    return ", ".join(f"{f.spec.name!r} {f.spec.dtype.name} {f.spec.shape}" for f in fields.values())
