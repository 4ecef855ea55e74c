"""The premise of candle's run cache, held against the real wheel: for the same wheel, machine and
inputs candle's numbers are the same bits, so a cached run is what running candle again gives.

For every family: a run stored in the cache, then a fresh run (no cache) of the same inputs, at
f32 and f16, equal bit for bit (greedy tokens, every teacher-forced row, every per-layer value).
A run that fails is not stored."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import portkit_native as pn
from fixtures.families import FAMILIES, family_fixture
from portkit.families import BY_NAME
from portkit.verify import cachefiles
from portkit.verify.candle import cache as runcache
from portkit.verify.candle.cache import RunCache
from portkit.verify.candle.native import load_family, load_llama
from portkit.verify.candle.run import run_candle

AGREEING = {family: ("int-window" if family == "mixtral" else "legacy") for family in FAMILIES}
#: runs candle itself refuses: gemma3's prefill with 2 KV heads (test_family_runners.py), and
#: mixtral below f32 (PK308: mixtral.rs:340-348 multiplies the f16 expert output by f32 routing weights),
#: phi below f32 (PK321: phi.rs:61-77 builds its rotary table in F32 whatever the model's dtype)
FAILS = {("gemma3", "f32"), ("gemma3", "f16"), ("mixtral", "f16"), ("phi", "f16")}
TOKENS = 3


def _run(family: str, dtype: str, cache: RunCache | None):
    d = family_fixture(family, AGREEING[family])
    ids = json.loads((d / "prompt.json").read_text())["ids"]
    files, text = [d / "model.safetensors"], (d / "config.json").read_text()
    if family == "llama":
        load = lambda: load_llama(files, text, dtype=dtype)  # noqa: E731
    else:
        load = lambda: load_family(family, files, text, dtype=dtype)  # noqa: E731
    key = runcache.run_key(
        loader=family,
        device="cpu",
        dtype=dtype,
        config_text=text,
        files=cachefiles.fingerprints(files),
        prompt=ids,
        forced=None,
        tokens=TOKENS,
        capture=BY_NAME[family].capture,
    )
    return run_candle(load, ids, None, TOKENS, label="as written", capture=BY_NAME[family].capture, cache=cache), key


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_cached_run_is_a_fresh_run_bit_for_bit(family: str, dtype: str, tmp_path: Path) -> None:
    _, key = _run(family, dtype, None)
    cache = RunCache(key, root=tmp_path)
    stored, _ = _run(family, dtype, cache)
    if (family, dtype) in FAILS:
        assert stored.failure is not None and not cache.path.exists(), "a failed run is never stored"
        return
    assert stored.failure is None and stored.source == "computed" and cache.path.exists()
    hit, _ = _run(family, dtype, cache)
    fresh, _ = _run(family, dtype, None)
    assert hit.source == "cache" and fresh.source == "computed"
    assert hit.greedy == fresh.greedy == stored.greedy
    assert hit.rows is not None and fresh.rows is not None
    assert hit.rows.tobytes() == fresh.rows.tobytes(), f"{family} {dtype}: candle's rows differ between two runs"
    if BY_NAME[family].capture:
        assert hit.layers is not None and fresh.layers is not None and list(hit.layers) == list(fresh.layers)
        assert all(hit.layers[k].tobytes() == fresh.layers[k].tobytes() for k in fresh.layers)
    else:
        assert hit.layers is None and fresh.layers is None


def test_the_wheel_digest_is_the_installed_extension_module() -> None:
    from portkit_native import _native

    expected = hashlib.sha256(Path(_native.__file__).read_bytes() + Path(pn.__file__).read_bytes()).hexdigest()
    assert runcache.wheel_digest() == expected
    # negative control: the digest is of the bytes, so another build differs
    assert (
        hashlib.sha256(Path(_native.__file__).read_bytes()[:-1] + Path(pn.__file__).read_bytes()).hexdigest()
        != expected
    )


def test_rows_differ_between_dtypes() -> None:
    """The test above could pass on a cache that ignored the dtype only if f16 and f32 gave the
    same bits; they do not, so the dtype in the key matters."""
    a, _ = _run("llama", "f32", None)
    b, _ = _run("llama", "f16", None)
    assert a.rows is not None and b.rows is not None and not np.array_equal(a.rows, b.rows)


@pytest.mark.parametrize("env,expected", [("3", 3), ("1", 1)])
def test_candle_threads_is_candles_own_count(monkeypatch: pytest.MonkeyPatch, env: str, expected: int) -> None:
    """The key's thread count is candle-core's `get_num_threads`, which reads RAYON_NUM_THREADS
    on every call: "3" and 3 are one key (the wheel parses the text, the key holds the number)."""
    monkeypatch.setenv("RAYON_NUM_THREADS", env)
    assert runcache.candle_threads() == pn.cpu_threads() == expected
    monkeypatch.setenv("RAYON_NUM_THREADS", "not a number")  # candle then uses the physical cores
    assert runcache.candle_threads() == pn.cpu_threads() >= 1


@pytest.mark.parametrize("given", [None, "", "3"])
def test_the_wheel_pins_candles_thread_count_once(given: str | None) -> None:
    """candle-core reads its thread count on every CPU matmul, parsing /proc/cpuinfo when
    RAYON_NUM_THREADS is unset or empty; importing the wheel sets the variable to the count candle
    computes (a value the user set stays), so the count and the sums are the same."""
    env = {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}
    if given is not None:
        env["RAYON_NUM_THREADS"] = given
    probe = "import os, portkit_native as pn; print(os.environ['RAYON_NUM_THREADS'], pn.cpu_threads())"
    pinned, threads = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert pinned == threads and int(threads) >= 1
    if given == "3":
        assert threads == "3"
