"""A cache entry whose checksum matches is still used only when it is what verify could have
written (issue 20, item 6): rows `[1..max(tokens, 1), vocab]` of float32, greedy ids that fit,
layers present when captured, sizes that add up to the file's. Everything else reads as absent,
so a tampered cache (a restored CI cache, say) only makes verify slower: never a wrong shape,
and never gigabytes from a small file.

Each case forges an entry with a valid checksum (`cachefiles.encode`), so only the new checks
can refuse it.
"""

from __future__ import annotations

import hashlib
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from portkit.verify import arrayblob, cachefiles
from portkit.verify.candle import cache as runcache
from portkit.verify.candle.cache import RunCache
from portkit.verify.reference import cache as refcache
from portkit.verify.reference.cache import RefCache
from portkit.verify.reference.compute import ReferenceOutputs

VOCAB, TOKENS, PROMPT = 5, 3, [1, 2, 3]


def _ref_cache(tmp_path: Path) -> RefCache:
    return RefCache("k" * 64, PROMPT, TOKENS, root=tmp_path / "ref", vocab=VOCAB)


def _good() -> tuple[dict, dict[str, np.ndarray]]:
    rows = np.random.default_rng(0).standard_normal((TOKENS, VOCAB)).astype(np.float32)
    meta = {"greedy": [4, 0, 2], "nonfinite_weights": [], "captured": True}
    return meta, {"rows": rows, "layer:layer.0": np.ones((3, 4), np.float32)}


def _forge(path: Path, magic: bytes, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    """An entry with a valid checksum around whatever payload we like."""
    _forge_payload(path, magic, arrayblob.pack(arrays, meta))


def _forge_payload(path: Path, magic: bytes, payload: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(magic + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def test_a_forged_entry_of_the_right_shape_is_read(tmp_path: Path) -> None:
    """The control: the forging itself makes a readable entry (so each refusal below is the check's)."""
    c = _ref_cache(tmp_path)
    meta, arrays = _good()
    _forge(c.path(None), refcache.MAGIC, meta, arrays)
    hit = c.get(None)
    assert hit is not None and hit.greedy == [4, 0, 2] and hit.rows.shape == (TOKENS, VOCAB)


def _wrong(meta: dict, arrays: dict[str, np.ndarray], case: str) -> tuple[dict, dict[str, np.ndarray]]:
    meta, arrays = dict(meta), dict(arrays)
    rows = arrays["rows"]
    if case == "other vocab":
        arrays["rows"] = np.zeros((TOKENS, VOCAB + 1), np.float32)
    elif case == "no rows":
        arrays["rows"] = np.zeros((0, VOCAB), np.float32)
    elif case == "too many rows":
        arrays["rows"] = np.zeros((TOKENS + 1, VOCAB), np.float32)
    elif case == "3-d rows":
        arrays["rows"] = rows[None]
    elif case == "1-d rows":
        arrays["rows"] = rows[0]
    elif case == "float64 rows":
        arrays["rows"] = rows.astype(np.float64)
    elif case == "greedy outside the vocabulary":
        meta["greedy"] = [4, 0, VOCAB]
    elif case == "negative greedy":
        meta["greedy"] = [-1]
    elif case == "more greedy than tokens":
        meta["greedy"] = [0] * (TOKENS + 1)
    elif case == "captured without layers":
        arrays.pop("layer:layer.0")
    elif case == "no captured flag":
        meta.pop("captured")
    elif case == "meta not an object":
        return ["greedy"], arrays  # type: ignore[return-value]
    elif case == "int64 layer":
        arrays["layer:layer.0"] = np.ones((3, 4), np.int64)
    return meta, arrays


CASES = [
    "other vocab",
    "no rows",
    "too many rows",
    "3-d rows",
    "1-d rows",
    "float64 rows",
    "greedy outside the vocabulary",
    "negative greedy",
    "more greedy than tokens",
    "captured without layers",
    "no captured flag",
    "meta not an object",
    "int64 layer",
]


@pytest.mark.parametrize("case", CASES)
def test_a_reference_entry_of_another_shape_reads_as_absent(tmp_path: Path, case: str) -> None:
    c = _ref_cache(tmp_path)
    _forge(c.path(None), refcache.MAGIC, *_wrong(*_good(), case))
    assert c.get(None) is None


@pytest.mark.parametrize("case", [c for c in CASES if c not in ("no captured flag",)])
def test_a_run_entry_of_another_shape_reads_as_absent(tmp_path: Path, case: str) -> None:
    c = RunCache("ab" + "c" * 62, root=tmp_path / "candle", tokens=TOKENS, vocab=VOCAB)
    meta, arrays = _wrong(*_good(), case)
    if isinstance(meta, dict):
        meta = {"greedy": meta.get("greedy"), "captured": meta.get("captured", True)}
    _forge(c.path, runcache.MAGIC, meta, arrays)
    assert c.get() is None
    good_meta, good_arrays = _good()
    _forge(c.path, runcache.MAGIC, {"greedy": good_meta["greedy"], "captured": True}, good_arrays)
    assert c.get() is not None  # the same forging with the right shapes is read


def _claiming(rows_shape: list[int]) -> bytes:
    """A good entry's payload whose header says its rows have `rows_shape`."""
    meta, arrays = _good()
    payload = arrayblob.pack(arrays, meta)
    n = int.from_bytes(payload[:8], "little")
    header = json.loads(payload[8 : 8 + n])
    header["arrays"][0][2] = rows_shape
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + payload[8 + n :]


def test_an_entry_claiming_more_than_the_file_holds_is_refused_before_it_is_allocated(tmp_path: Path) -> None:
    """A header that says the rows take 256 MiB, in a file of a few hundred bytes."""
    c = _ref_cache(tmp_path)
    _forge_payload(c.path(None), refcache.MAGIC, _claiming([TOKENS, 2**24 // TOKENS * 4]))
    assert c.path(None).stat().st_size < 2**12
    tracemalloc.start()
    try:
        assert c.get(None) is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak


@pytest.mark.parametrize(
    "shape",
    [[TOKENS, -VOCAB], [TOKENS, 2.5], [TOKENS, VOCAB - 1], [TOKENS, VOCAB + 1], "x"],
    ids=["negative", "fraction", "fewer bytes", "more bytes", "no list"],
)
def test_an_entry_whose_sizes_do_not_add_up_is_refused(shape: object) -> None:
    meta, arrays = _good()
    blob = cachefiles.encode(refcache.MAGIC, meta, arrays)
    assert cachefiles.decode(refcache.MAGIC, blob) is not None
    payload = _claiming(shape)  # type: ignore[arg-type]
    forged = refcache.MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload
    assert cachefiles.decode(refcache.MAGIC, forged) is None
    trailing = blob[len(refcache.MAGIC) + 65 :] + b"\0" * 4
    assert (
        cachefiles.decode(
            refcache.MAGIC, refcache.MAGIC + hashlib.sha256(trailing).hexdigest().encode() + b"\n" + trailing
        )
        is None
    )


def test_an_as_candle_entry_without_its_effect_is_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """as_candle.reference_as_candle reads the effect among the layers: an entry without it is
    recomputed, never a KeyError."""
    from types import SimpleNamespace

    from portkit.verify.reference import as_candle, compute

    monkeypatch.setenv("PORTKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PORTKIT_VERIFY_REFERENCE", "inprocess")
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\x00" * 64)
    model = SimpleNamespace(root=tmp_path, weight_files=(weights,), vocab_size=VOCAB, config_text="{}")
    reference = SimpleNamespace(use_cache=True, prompt=PROMPT, inputs=[0, 0, 0], fingerprints=None, mode="streamed")
    edit = {"what": "x", "config": {}}
    key = as_candle.as_candle_key(model, reference, "{}", {}, 2, ())  # type: ignore[arg-type]
    RefCache(key, PROMPT, TOKENS, vocab=VOCAB).put(
        [0, 0, 0],
        ReferenceOutputs(
            greedy=[],
            rows=np.zeros((1, VOCAB), np.float32),
            layers={"layer.0": np.zeros((3, 2), np.float32)},
            nonfinite_weights=[],
        ),
    )
    computed = []

    def as_candle_reference(*args: object) -> tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]:
        computed.append(args)
        return (
            np.ones((TOKENS, VOCAB), np.float32),
            {"layer.0": np.ones((3, 2), np.float32)},
            np.full(2, 0.5, np.float32),
        )

    monkeypatch.setattr(compute, "as_candle_reference", as_candle_reference)
    got = as_candle.reference_as_candle(model, reference, TOKENS, edit, 2, lambda _s: None)  # type: ignore[arg-type]
    assert len(computed) == 1 and got.effect_by_position.tolist() == [0.5, 0.5] and got.source == "computed"
    # and now the cache has it, with its effect
    again = as_candle.reference_as_candle(model, reference, TOKENS, edit, 2, lambda _s: None)  # type: ignore[arg-type]
    assert again.effect_by_position.tolist() == [0.5, 0.5] and again.source == "cache" and len(computed) == 1
    assert set(again.reference.layers) == {"layer.0"} and again.reference.rows.shape == (TOKENS, VOCAB)
