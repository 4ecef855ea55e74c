"""The runtime rules' predicted candle errors, held to the text in candle 0.11.0's own source.

verify confirms a crash finding only when candle's message contains the text the rule
predicts, so a prediction must be candle's whole message: a fragment ("rope") would let an
unrelated failure (`missing field `rope_scaling``) confirm it. PK302 fails only on macOS's
`accelerate` build, so no runner here can reach it: its text is checked against the `bail!`
in candle-core instead. PK304's is checked against every backend's `bail!` in candle-nn's
`RotaryEmb` (the op `candle_nn::rotary_emb::rope`, which llama.rs:267 calls); the CPU case is
also run for real in tests/native/test_candle_view_oracle.py.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from fixtures import skeleton as sk
from portkit.lint import lint_paths
from portkit.settings import Settings
from portkit.target import Target

CARGO_SRC = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo")) / "registry" / "src"
DEBUG_DTYPE = {"f16": "F16", "bf16": "BF16", "f32": "F32"}  # candle's `{:?}` of a DType


def crate_source(crate: str, rel: str) -> str:
    found = sorted(CARGO_SRC.glob(f"*/{crate}-0.11.0/{rel}"))
    assert found, f"{crate}-0.11.0/{rel} not under {CARGO_SRC}: the native build fetches it (make native)"
    return found[0].read_text()


def predicted(tmp_path: Path, code: str, **target: object) -> str:
    d = sk.write_model(tmp_path / "m", sk.config("tf4"), weights=False)
    report = lint_paths([d], Settings(target=Target(**target), preview=True, respect_pyproject=False))
    expects = [f.probe.shown_expect() for f in report.findings if f.code == code and f.probe is not None]
    assert len(expects) == 1 and expects[0], f"{code} for {target}: {expects}"
    return expects[0]


def bails(source: str) -> list[str]:
    """The message format of every `bail!("...")` in a Rust source."""
    return re.findall(r'bail!\(\s*"((?:[^"\\]|\\.)*)"', source)


def test_pk302_predicts_the_accelerate_bail_word_for_word(tmp_path: Path) -> None:
    expect = predicted(tmp_path, "PK302", dtype="f16", features=frozenset({"accelerate"}))
    assert expect in bails(crate_source("candle-core", "src/cpu_backend/mod.rs"))


def _op_section(source: str, op: str, backend: str) -> str:
    start = source.index(f"impl candle::CustomOp3 for {op} {{")
    end = source.find("impl candle::CustomOp3 for", start + 1)
    body = source[start : end if end > 0 else len(source)]
    at = body.index(f"fn {backend}_fwd(")
    nxt = body.find("\n    fn ", at + 1)  # the next method, not a nested fn
    return body[at : nxt if nxt > 0 else len(body)]


@pytest.mark.parametrize("device", ["cpu", "cuda", "metal"])
@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_pk304_predicts_the_whole_rope_error_of_its_backend(device: str, dtype: str, tmp_path: Path) -> None:
    expect = predicted(tmp_path, "PK304", device=device, dtype=dtype)
    section = _op_section(crate_source("candle-nn", "src/rotary_emb.rs"), "RotaryEmb", device)
    # the model's dtype for xs, the f32 Cache's for cos and sin: `{:?} {:?} {:?}` in that order
    rendered = [
        b.replace("{:?} {:?} {:?}", f"{DEBUG_DTYPE[dtype]} F32 F32") for b in bails(section) if "{:?} {:?} {:?}" in b
    ]
    assert rendered, f"no dtype bail in RotaryEmb's {device}_fwd"
    assert expect in rendered, f"PK304 predicts {expect!r}; candle's {device} rope says one of {rendered}"
