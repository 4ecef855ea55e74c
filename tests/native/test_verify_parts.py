"""Pieces of `portkit verify` on their own: greedy forks at near ties, candle's error text,
GGUF tolerance by tensor type, the counterfactual GGUF writer."""

from __future__ import annotations

import numpy as np
import pytest

from portkit.verify.candle.run import Failure, clean_message, patched_config
from portkit.verify.judge.checks import TOLERANCES, compare_greedy
from portkit.verify.judge.confirm import describe_patch
from portkit.verify.sections.gguf import gguf_tolerance


def test_greedy_fork_at_near_tie_is_not_a_failure():
    rows = np.zeros((6, 5), dtype=np.float32)
    rows[3, 1], rows[3, 2] = 10.0, 9.95  # prompt_len 3: generated token 1 is decided at row 3
    check = compare_greedy([0, 1, 4], [0, 2, 2], ref_rows=rows, prompt_len=3, near_tie=0.1)
    assert check.first_divergence == 1 and check.ref_margin == pytest.approx(0.05, abs=1e-6)
    assert check.at_near_tie and check.ok
    assert "near tie" in check.line()
    strict = compare_greedy([0, 1, 4], [0, 2, 2], ref_rows=rows, prompt_len=3, near_tie=0.01)
    assert not strict.ok and not strict.at_near_tie
    assert not compare_greedy([0, 1], [0, 2]).ok  # no margin known: any fork fails


def test_failure_keeps_candles_text_and_location_drops_backtrace():
    raw = (
        "panicked at /home/user/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-transformers-0.11.0/"
        "src/models/llama.rs:524:75: called `Result::unwrap()` on an `Err` value: cannot find tensor x\n"
        "   0: candle_core::error::Error::bt\n  17: type_call\n             at /tmp/Objects/typeobject.c:1091:11\n"
    )
    f = Failure(stage="load", kind="CandlePanic", message=clean_message(raw))
    assert f.message == (
        "panicked at candle-transformers-0.11.0/src/models/llama.rs:524:75: called `Result::unwrap()` on an "
        "`Err` value: cannot find tensor x"
    )
    assert f.location == "candle-transformers-0.11.0/src/models/llama.rs:524"
    assert f.line().startswith("candle panicked at load: candle-transformers-0.11.0/src/models/llama.rs:524:75")
    assert (
        Failure("config", "ConfigError", "missing field `x`").line() == "candle refused config.json: missing field `x`"
    )


def test_patch_helpers():
    text = patched_config('{"a": 1, "rope_theta": 10000.0}', {"rope_theta": 100000.0, "a": None})
    assert '"rope_theta": 100000.0' in text and '"a"' not in text
    assert describe_patch({"rope_theta": 100000.0}) == "rope_theta=100000"
    assert describe_patch({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}) == "rope_scaling={llama3 ...}"


@pytest.mark.parametrize(
    "types, name",
    [
        ({"F32": 22}, "f32"),
        ({"F16": 22}, "f16"),
        ({"BF16": 3, "F32": 1}, "bf16"),
        ({"Q8_0": 22}, "q8_0"),
        ({"Q4_K": 10, "Q5_0": 9, "Q6_K": 1}, "q4_k"),
    ],
)
def test_gguf_tolerance_by_weight_type(types, name):
    assert gguf_tolerance(types) is TOLERANCES[name]


def test_every_tolerance_has_a_reason():
    for t in TOLERANCES.values():
        assert len(t.reason) > 40 and "docs/measurements.md" in t.reason, t.name  # its evidence, reproducible


def test_rewrite_gguf_permutes_qk_rows_and_sets_metadata(gguf_file, tmp_path):
    gguf = pytest.importorskip("gguf")
    from fixtures.gguf_writer import permute
    from portkit.verify.candle.gguf_edit import read_metadata, rewrite_gguf, tensor_types

    for qtype in ("f32", "q8_0"):
        good = gguf_file("healthy-tied", qtype=qtype)
        bad = gguf_file("healthy-tied", qtype=qtype, permute_qk=False, freq_base=False)
        out = rewrite_gguf(
            bad, tmp_path / f"fixed-{qtype}.gguf", set_meta={"llama.rope.freq_base": 100000.0}, permute_qk=True
        )
        assert tensor_types(out) == tensor_types(good)
        meta_good, meta_out = read_metadata(good), read_metadata(out)
        assert meta_out["llama.rope.freq_base"] == pytest.approx(100000.0)
        assert meta_out == meta_good  # every other key copied with its value
        g = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(good)).tensors}
        o = {t.name: np.asarray(t.data) for t in gguf.GGUFReader(str(out)).tensors}
        assert g.keys() == o.keys()
        for name in g:
            assert np.array_equal(g[name], o[name]), (qtype, name)  # byte-identical to the converter's file
    w = np.arange(16 * 3).reshape(16, 3)
    from portkit.verify.candle.gguf_edit import permute_rows

    assert np.array_equal(permute_rows(w, 2), permute(w, 2))
