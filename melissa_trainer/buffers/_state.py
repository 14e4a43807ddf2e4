"""Checkpoint helpers: samples <-> flat arrays, RNG state <-> JSON, files. No pickle."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from ._common import Sample
from .rate_limiter import RateLimiter

FORMAT_VERSION = 1
ARRAYS_FILE = "buffer.safetensors"
META_FILE = "buffer.json"
# dtype kind -> item sizes safetensors can hold
_STORABLE = {"b": (1,), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8), "f": (2, 4, 8)}


def encode_sample(arrays: dict[str, np.ndarray], prefix: str, sample: Sample) -> None:
    """Add ``sample``'s fields to ``arrays`` as ``"{prefix}/{field}"``.

    Raises:
        TypeError: the sample is not a dict of numeric/bool numpy arrays (names the field).
    """
    if not isinstance(sample, dict):
        raise TypeError(
            f"cannot snapshot buffer: a held sample is a {type(sample).__name__}, not a dict"
        )
    for name, value in sample.items():
        if not isinstance(name, str):
            raise TypeError(f"cannot snapshot buffer: field name {name!r} is not a str")
        if not isinstance(value, np.ndarray):
            raise TypeError(
                f"cannot snapshot buffer: field {name!r} is a {type(value).__name__}, "
                "not a numpy.ndarray"
            )
        dt = value.dtype
        if dt.itemsize not in _STORABLE.get(dt.kind, ()):
            raise TypeError(
                f"cannot snapshot buffer: field {name!r} has dtype {dt} (object/ragged, "
                "string or complex arrays cannot be checkpointed; use bool, int, uint or float)"
            )
        if not dt.isnative:
            value = value.astype(dt.newbyteorder("="))
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value)
        arrays[f"{prefix}/{name}"] = value


def field_order(arrays: dict[str, np.ndarray]) -> list[str]:
    """The field names of ``"{prefix}/{field}"`` arrays, each once, as first met (the
    order of the samples' dicts, which safetensors does not keep)."""
    return list(dict.fromkeys(key.partition("/")[2] for key in arrays))


def decode_samples(
    arrays: dict[str, np.ndarray], order: list[str] | None = None
) -> dict[str, Sample]:
    """Group ``"{prefix}/{field}"`` arrays back into samples keyed by prefix, each
    sample's fields in `order` (from `field_order`; those it lacks after them)."""
    samples: dict[str, Sample] = {}
    for key, value in arrays.items():
        prefix, sep, name = key.partition("/")
        if not sep:
            raise ValueError(f"malformed buffer state: array key {key!r} has no '/'")
        if not isinstance(value, np.ndarray):
            raise ValueError(f"malformed buffer state: {key!r} is not a numpy array")
        samples.setdefault(prefix, {})[name] = value
    if order is None:
        return samples
    if not isinstance(order, list) or not all(isinstance(k, str) for k in order):
        raise ValueError("malformed buffer state: 'field_order' must be a list of names")
    rank = {name: i for i, name in enumerate(order)}
    last = len(order)
    orders: dict[tuple[str, ...], list[str]] = {}  # one sort per distinct field set
    for prefix, sample in samples.items():
        keys = tuple(sample)
        want = orders.get(keys)
        if want is None:
            want = orders[keys] = sorted(keys, key=lambda k: rank.get(k, last))
        if list(keys) != want:
            samples[prefix] = {k: sample[k] for k in want}
    return samples


def rng_state(rng: np.random.Generator) -> dict[str, Any]:
    """JSON-friendly state of a PCG64 generator (128-bit integers as strings)."""
    state = rng.bit_generator.state
    if state.get("bit_generator") != "PCG64":  # pragma: no cover - we only create PCG64
        raise TypeError(f"unsupported bit generator {state.get('bit_generator')!r}")
    return {
        "bit_generator": "PCG64",
        "state": str(state["state"]["state"]),
        "inc": str(state["state"]["inc"]),
        "has_uint32": int(state["has_uint32"]),
        "uinteger": int(state["uinteger"]),
    }


def rng_from_state(meta: dict[str, Any]) -> np.random.Generator:
    """Inverse of :func:`rng_state`."""
    if meta.get("bit_generator") != "PCG64":
        raise ValueError(f"unsupported bit generator {meta.get('bit_generator')!r}")
    bit_gen = np.random.PCG64()
    bit_gen.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(meta["state"]), "inc": int(meta["inc"])},
        "has_uint32": int(meta["has_uint32"]),
        "uinteger": int(meta["uinteger"]),
    }
    return np.random.Generator(bit_gen)


def int_list(
    name: str, values: Any, *, length: int | None = None, upper: int | None = None
) -> list[int]:
    """Validate a list of ints (optionally of a given length, each in ``[0, upper)``)."""
    ok = isinstance(values, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in values
    )
    if ok and upper is not None:
        ok = all(0 <= v < upper for v in values)
    if not ok:
        bound = f" in [0, {upper})" if upper is not None else ""
        raise ValueError(f"malformed buffer state: {name!r} must be a list of ints{bound}")
    if length is not None and len(values) != length:
        raise ValueError(
            f"malformed buffer state: {name!r} has {len(values)} entries, expected {length}"
        )
    return list(values)


def write_files(
    directory: str | os.PathLike[str], arrays: dict[str, np.ndarray], meta: dict[str, Any]
) -> None:
    """Write ``buffer.safetensors`` and ``buffer.json`` (each to a temporary name, then renamed)."""
    from safetensors.numpy import save_file

    os.makedirs(directory, exist_ok=True)
    st_path = os.path.join(directory, ARRAYS_FILE)
    json_path = os.path.join(directory, META_FILE)
    save_file(arrays, st_path + ".tmp")
    os.replace(st_path + ".tmp", st_path)
    with open(json_path + ".tmp", "w", encoding="utf-8") as fh:
        json.dump(meta, fh)
    os.replace(json_path + ".tmp", json_path)


def read_files(directory: str | os.PathLike[str]) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Read what :func:`write_files` wrote."""
    from safetensors.numpy import load_file

    arrays = load_file(os.path.join(directory, ARRAYS_FILE))
    with open(os.path.join(directory, META_FILE), encoding="utf-8") as fh:
        meta = json.load(fh)
    return arrays, meta


class LazyArrays(Mapping[str, np.ndarray]):
    """The arrays of a ``buffer.safetensors``, each read from the file when asked for
    (a mapping, as the dict `read_files` gives): a reader that wants a few samples of
    a large snapshot reads only those. The header is parsed once (by safetensors,
    ``safe_open``); each access copies one array out of the file (a fresh, writable
    array, as `read_files` gives). Not thread-safe.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        from safetensors import SafetensorError, safe_open

        self._file = safe_open(os.fspath(path), framework="numpy")
        self._error = SafetensorError  # (imported here, as `read_files` does)
        self._keys: set[str] | None = None  # built when asked for (membership, length)

    def __getitem__(self, key: str) -> np.ndarray:
        try:
            return self._file.get_tensor(key)
        except self._error:
            raise KeyError(key) from None

    def _known(self) -> set[str]:
        if self._keys is None:
            self._keys = set(self._file.keys())
        return self._keys

    def __contains__(self, key: object) -> bool:
        return key in self._known()  # (Mapping's would read the array)

    def __iter__(self) -> Iterator[str]:
        return iter(self._file.keys())

    def __len__(self) -> int:
        return len(self._known())


class CommonMeta(NamedTuple):
    counters: tuple[int, int, int, int]  # put, got, evicted, age_sum
    reuse_histogram: dict[int, int]
    closed: bool
    rng: np.random.Generator
    limiter: dict[str, Any] | None
    contents: dict[str, Any]


def parse_common_meta(
    meta: Any, kind: str, capacity: int, limiter: RateLimiter | None
) -> CommonMeta:
    """Validate the policy-independent part of a snapshot's meta (ValueError if unfit)."""
    if not isinstance(meta, dict):
        raise ValueError(f"buffer meta must be a dict, got {type(meta).__name__}")
    if meta.get("kind") != kind:
        raise ValueError(f"cannot load a {meta.get('kind')!r} buffer state into a {kind!r} buffer")
    if meta.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"unsupported buffer state format {meta.get('format_version')!r}")
    if meta.get("capacity") != capacity:
        raise ValueError(
            f"buffer state has capacity {meta.get('capacity')!r}, this buffer {capacity}"
        )
    lim_state = meta.get("rate_limiter")
    if (lim_state is None) != (limiter is None):
        raise ValueError(
            "buffer state and this buffer disagree on having a rate limiter "
            f"(state: {lim_state is not None}, buffer: {limiter is not None})"
        )
    try:
        if lim_state is not None:
            RateLimiter(1.0, 0.0, 0).load_state_dict(lim_state)  # validates
        put, got, evicted, age_sum = (int(meta[k]) for k in ("put", "got", "evicted", "age_sum"))
        contents = meta["contents"]
        if not isinstance(contents, dict):
            raise TypeError("contents is not a dict")
        return CommonMeta(
            counters=(put, got, evicted, age_sum),
            reuse_histogram={int(k): int(v) for k, v in meta["reuse_histogram"].items()},
            closed=bool(meta["closed"]),
            rng=rng_from_state(meta["rng"]),
            limiter=lim_state,
            contents=contents,
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"malformed buffer state: {exc!r}") from exc
