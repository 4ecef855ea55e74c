"""The native continuation and batch (`native/src/chat.rs`) on every family runner and GGUF loader.

Each goes through the library's own `forward(x, offset)`. Where candle (the wheel's 0.11.1) is right, a second
turn equals the same positions fed one token at a time and a batch equals each row alone (up to
summation order); where it is not, the failure comes back as a Python exception carrying candle's
own message, or the rows differ, exactly as the PK309-PK316 rules say.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

pn = pytest.importorskip("portkit_native")

from fixtures.chat_paths import family_gguf  # noqa: E402
from fixtures.families import family_fixture  # noqa: E402
from portkit.families import FAMILIES  # noqa: E402
from portkit.verify.sections.batch import rows_for  # noqa: E402
from portkit.verify.sections.turns import segment_for  # noqa: E402

#: the variant of each family candle runs as transformers does
RUNS = {"mixtral": "int-window", "gemma3": "kv-heads-1"}
ATOL = 1e-4  # f32: summation order only
#: where the wheel's candle (0.11.1) fails the path itself, each tested below with candle's own message: phi's
#: square continuation mask (PK320) and glm4_new's rotary embedding, which keeps the first row (PK322)
FAILS_A_TURN = {"phi"}
FAILS_A_BATCH = {"glm4_new"}
#: where 0.11.0 fails a batch and 0.11.1 does not: the one-row causal mask, read past on the CPU (PK311), which
#: 0.11.1 builds with `utils::build_additive_causal_mask` (candle#3879); (family, dtype)
FAILS_A_BATCH_ON_0_11_0 = [("smollm3", "f32"), ("glm4_new", "f32"), ("qwen3_moe", "f16"), ("qwen3_moe", "bf16")]


def _runner(family: str, dtype: str = "f32"):
    d = family_fixture(family, RUNS.get(family, "legacy"))
    files = [str(d / "model.safetensors")]
    cfg = (d / "config.json").read_text()
    r = (
        pn.LlamaRunner(files, cfg, dtype=dtype)
        if family == "llama"
        else pn.FamilyRunner(family, files, cfg, dtype=dtype)
    )
    return r, json.loads((d / "prompt.json").read_text())["ids"]


def _control(r, prompt, fed, segment) -> np.ndarray:
    return np.asarray(r.teacher_forced_logits(prompt + fed + segment, len(prompt)))[len(fed) + 1 :]


@pytest.mark.parametrize("family", [f.name for f in FAMILIES if f.name not in FAILS_A_TURN])
def test_a_second_turn_equals_the_same_positions_one_at_a_time(family: str) -> None:
    r, prompt = _runner(family)
    fed = list(r.greedy(prompt, 8))
    seg = segment_for(prompt)
    got = np.asarray(r.continuation(prompt, fed, seg))
    assert got.shape == (len(seg), 256)
    assert np.abs(got - _control(r, prompt, fed, seg)).max() < ATOL
    # and a continuation right after the prompt (no answer fed)
    assert np.abs(np.asarray(r.continuation(prompt, [], seg)) - _control(r, prompt, [], seg)).max() < ATOL


@pytest.mark.parametrize("family", [f.name for f in FAMILIES if f.name not in FAILS_A_BATCH])
def test_a_batch_equals_each_row_alone(family: str) -> None:
    r, prompt = _runner(family)
    rows = rows_for(prompt, 3)
    got = np.asarray(r.batch_last_logits(rows))
    alone = np.stack([np.asarray(r.last_logits(x)) for x in rows])
    assert got.shape == (3, 256)
    assert np.abs(got - alone).max() < ATOL
    assert np.abs(alone[0] - alone[1]).max() > 0.1  # the rows are different inputs


def test_phi_second_turn_fails_in_its_square_mask() -> None:
    r, prompt = _runner("phi")
    fed = list(r.greedy(prompt, 8))
    seg = segment_for(prompt)
    with pytest.raises(
        pn.CandleError, match=r"shape mismatch in where_cond, lhs: \[1, 4, \d+, \d+\], rhs: \[1, 4, \d+, \d+\]"
    ):
        r.continuation(prompt, fed, seg)
    one = np.asarray(r.continuation(prompt, fed, seg[:1]))  # one token at the offset: no mask, it runs
    assert np.abs(one - _control(r, prompt, fed, seg[:1])).max() < ATOL


def test_glm4_new_batch_fails_in_its_rotary_embedding() -> None:
    r, prompt = _runner("glm4_new")
    with pytest.raises(pn.CandleError, match="shape mismatch in matmul"):
        r.batch_last_logits(rows_for(prompt, 2))
    alone = np.asarray(r.batch_last_logits(rows_for(prompt, 1)))[0]  # one row: nothing to keep
    assert np.abs(alone - np.asarray(r.last_logits(rows_for(prompt, 1)[0]))).max() < ATOL


#: argv[1]: a JSON list of [family, dtype, model dir]; prints what a batch of two does in the portkit_native on sys.path
ON_ANOTHER_RELEASE = """
import json, sys
import numpy as np
import portkit_native as pn
from portkit.verify.sections.batch import rows_for
out = []
for family, dtype, d in json.loads(sys.argv[1]):
    files = [d + "/model.safetensors"]
    r = pn.FamilyRunner(family, files, open(d + "/config.json").read(), dtype=dtype)
    rows = rows_for(json.load(open(d + "/prompt.json"))["ids"], 2)
    try:
        r.batch_last_logits(rows)
        out.append("ran")
    except pn.CandlePanic as e:
        out.append(str(e))
print(json.dumps({"release": pn.build_info()["candle_version"], "outcomes": out}))
"""


def test_a_batch_panics_reading_past_its_one_row_mask_on_0_11_0() -> None:
    import os
    import subprocess
    import sys

    from portkit.verify.candle import release_build

    site = release_build.ensure("0.11.0", lambda _: None)
    cases = [[f, dt, str(family_fixture(f, RUNS.get(f, "legacy")))] for f, dt in FAILS_A_BATCH_ON_0_11_0]
    proc = subprocess.run(
        [sys.executable, "-c", ON_ANOTHER_RELEASE, json.dumps(cases)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])},
        check=True,
    )
    doc = json.loads(proc.stdout)
    assert doc["release"] == "0.11.0"
    pattern = r"cpu_backend/utils\.rs:\d+:\d+: range end index \d+ out of range for slice of length \d+"
    assert all(re.search(pattern, o) for o in doc["outcomes"]), doc


@pytest.mark.parametrize("family,dtype", [c for c in FAILS_A_BATCH_ON_0_11_0 if c[0] not in FAILS_A_BATCH])
def test_a_batch_the_0_11_0_mask_failed_runs_on_the_wheel(family: str, dtype: str) -> None:
    r, prompt = _runner(family, dtype)
    rows = rows_for(prompt, 2)
    got = np.asarray(r.batch_last_logits(rows))
    alone = np.stack([np.asarray(r.last_logits(x)) for x in rows])
    assert np.abs(got - alone).max() < (ATOL if dtype == "f32" else 0.05)


def test_the_continuation_is_sensitive_to_the_offset() -> None:
    """Negative control: the same segment after another answer is another set of rows."""
    r, prompt = _runner("qwen2")
    fed = list(r.greedy(prompt, 8))
    seg = segment_for(prompt)
    a = np.asarray(r.continuation(prompt, fed, seg))
    b = np.asarray(r.continuation(prompt, fed[:4], seg))
    assert np.abs(a - b).max() > 0.1


@pytest.mark.parametrize("family", ["qwen2", "olmo2"])
def test_a_half_precision_second_turn_fails_with_candles_cat_error(family: str) -> None:
    r, prompt = _runner(family, "f16")
    fed = list(r.greedy(prompt, 4))
    with pytest.raises(pn.CandleError, match=r"dtype mismatch in cat, lhs: F16, rhs: F32"):
        r.continuation(prompt, fed, segment_for(prompt))
    r.continuation(prompt, fed, segment_for(prompt)[:1])  # one token at the offset: no mask, it runs


def test_gemma3_second_turn_past_its_window_fails_in_broadcast_add() -> None:
    r, prompt = _runner("gemma3")  # sliding_window 32
    fed = list(r.greedy(prompt, 9))
    seg = segment_for(prompt)
    with pytest.raises(
        pn.CandleError, match=r"shape mismatch in broadcast_add, lhs: \[1, 4, 8, 32\], rhs: \[1, 1, 8, 33\]"
    ):
        r.continuation(prompt, fed, seg)
    ok = np.asarray(r.continuation(prompt, fed[:8], seg))  # ends at 32: inside the window
    assert np.abs(ok - _control(r, prompt, fed[:8], seg)).max() < ATOL


def test_qwen2_padding_mask_forward_attends_both_ways() -> None:
    r, prompt = _runner("qwen2")
    rows = rows_for(prompt, 2)
    got = np.asarray(r.padded_batch_logits(rows))
    causal = np.stack([np.asarray(r.teacher_forced_logits(x, 1)) for x in rows])
    assert got.shape == causal.shape == (2, len(prompt), 256)
    assert np.abs(got - causal).max() > 1.0  # bidirectional: every position sees later tokens
    one = np.asarray(r.padded_batch_logits(rows[:1]))[0]
    assert np.abs(one[0] - causal[0][0]).max() > 1e-3  # position 0 too: it attends to the whole row
    with pytest.raises(NotImplementedError, match="no forward that takes a padding mask"):
        _runner("qwen3")[0].padded_batch_logits(rows)


def test_bad_batches_and_segments_are_value_errors() -> None:
    r, prompt = _runner("qwen2")
    with pytest.raises(ValueError, match="equal length"):
        r.batch_last_logits([prompt, prompt[:-1]])
    with pytest.raises(ValueError, match="at least one non-empty row"):
        r.batch_last_logits([])
    with pytest.raises(ValueError, match="a continuation needs a prompt and a segment"):
        r.continuation(prompt, [], [])


def _gguf(key: str):
    from portkit.model.gguf_header import read_gguf
    from portkit.semantics.gguf import architecture_of, loader_for

    d, g = family_gguf(key)
    r = pn.GgufRunner(str(g), loader=loader_for(architecture_of(read_gguf(g))))
    return r, json.loads((d / "prompt.json").read_text())["ids"]


def _written(family: str, tmp_path: Path):
    from fixtures.gguf_writer import write_gguf
    from portkit.model.gguf_header import read_gguf
    from portkit.semantics.gguf import architecture_of, loader_for

    d = family_fixture(family, "legacy")
    g = write_gguf(d, tmp_path / f"{family}.gguf")
    return pn.GgufRunner(str(g), loader=loader_for(architecture_of(read_gguf(g)))), json.loads(
        (d / "prompt.json").read_text()
    )["ids"]


@pytest.mark.parametrize("family", ["llama", "qwen2", "phi3"])
def test_gguf_loaders_continue_and_batch_like_their_control(family: str, tmp_path: Path) -> None:
    r, prompt = _written(family, tmp_path)
    fed = list(r.greedy(prompt, 8))
    seg = segment_for(prompt)
    assert np.abs(np.asarray(r.continuation(prompt, fed, seg)) - _control(r, prompt, fed, seg)).max() < ATOL
    rows = rows_for(prompt, 2)
    alone = np.stack([np.asarray(r.last_logits(x)) for x in rows])
    assert np.abs(np.asarray(r.batch_last_logits(rows)) - alone).max() < ATOL


def test_quantized_qwen3_on_the_cpu() -> None:
    """A batch panics (PK313); a second turn after decode steps misses them (PK314), right after the prompt it does
    not."""
    r, prompt = _gguf("qwen3")
    with pytest.raises(
        pn.CandlePanic, match=r"quantized_qwen3\.rs:357:\d+: called `Option::unwrap\(\)` on a `None` value"
    ):
        r.batch_last_logits(rows_for(prompt, 2))
    seg = segment_for(prompt)
    fed = list(r.greedy(prompt, 8))
    diff = np.abs(np.asarray(r.continuation(prompt, fed, seg)) - _control(r, prompt, fed, seg)).max(axis=1)
    assert diff[0] < ATOL and (diff[1:] > 1.0).all(), diff  # the first position is a one-token step
    assert np.abs(np.asarray(r.continuation(prompt, [], seg)) - _control(r, prompt, [], seg)).max() < ATOL


def test_quantized_gemma3_fails_a_second_turn_and_a_batch() -> None:
    r, prompt = _gguf("gemma3")
    with pytest.raises(pn.CandleError, match=r"dtype mismatch in cat, lhs: F32, rhs: U32"):
        r.continuation(prompt, list(r.greedy(prompt, 2)), segment_for(prompt))
    with pytest.raises(pn.CandleError, match="input has to be contiguous"):
        r.batch_last_logits(rows_for(prompt, 2))
    r.batch_last_logits(rows_for(prompt, 1))  # one row: the view is contiguous
