"""quantized_gemma3's per-layer capture: a copy of the library's forward (native/src/quantized_gemma3_copy.rs)
that records every layer and sub-layer. It must change no number: its logits equal the library's
bit for bit, on an F32 and a Q8_0 file; it names what transformers' Gemma 3 names; and the loaders
without a copy say so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixtures.families import family_fixture
from fixtures.gguf_writer import write_gguf
from portkit.families import BY_NAME, sublayers

pn = pytest.importorskip("portkit_native")
IDS = [1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 10, 2]


@pytest.mark.parametrize("qtype", ["f32", "q8_0"])
def test_capture_logits_are_the_librarys_bit_for_bit(qtype: str, tmp_path: Path) -> None:
    path = write_gguf(family_fixture("gemma3", "kv-heads-1"), tmp_path / "g.gguf", qtype)
    runner = pn.GgufRunner(str(path), loader="quantized_gemma3")
    cap = runner.capture(IDS)
    assert np.array_equal(cap["logits"], runner.last_logits(IDS))
    n = 6
    subs = sublayers.of(BY_NAME["gemma3"])
    want = (
        {"embeddings", "norm", "logits"}
        | {f"layer.{i}" for i in range(n)}
        | {f"layer.{i}.{s}" for i in range(n) for s in subs}
    )
    assert set(cap) == want, set(cap) ^ want
    assert cap["layer.0"].shape == (len(IDS), 64) and cap["layer.0.self_attn.q_proj"].shape == (len(IDS), 4 * 16)
    # a second run gives the same bits (the copy keeps no state between captures)
    assert np.array_equal(runner.capture(IDS)["layer.5"], cap["layer.5"])


def test_loaders_without_a_copy_say_so(tmp_path: Path) -> None:
    assert pn.gguf_capture_loaders() == ["quantized_gemma3"]
    path = write_gguf(family_fixture("qwen2", "legacy"), tmp_path / "q.gguf")
    with pytest.raises(NotImplementedError, match="per-layer: not available for quantized_qwen2 GGUFs"):
        pn.GgufRunner(str(path), loader="quantized_qwen2").capture(IDS)
