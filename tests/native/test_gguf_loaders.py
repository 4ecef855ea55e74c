"""The GGUF rules' crash predictions against candle 0.11.0's own loaders.

Each case is a converter-written GGUF (`fixtures.gguf_writer` over a family fixture) with one thing
missing, or a hand-made MoE file; lint predicts the text candle fails with (`Probe.expect`), and
`portkit_native.GgufRunner(path, loader=...)` (the loader `general.architecture` routes the file to)
must fail with it. The untouched files are the negative control: they load and run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import pytest
from gguf import GGUFValueType

import portkit_native as pn
from fixtures.families import family_fixture
from fixtures.gguf_writer import write_gguf
from portkit.lint import lint_paths
from portkit.model.gguf_header import read_gguf
from portkit.semantics.gguf import architecture_of, loader_for
from portkit.settings import Settings
from tests.unit.rule_cases import mixtral_gguf

IDS = [5, 17, 33, 2, 88, 41]


def _write(family: str, **kw) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        return write_gguf(family_fixture(family, "legacy"), tmp / f"{family}.gguf", **kw)

    return make


def _mixtral_merged(tmp: Path) -> Path:
    d, _ = mixtral_gguf(merged=True)(tmp / "mixtral")
    return next(d.glob("*.gguf"))


# (code, file maker): lint must predict the failure and candle must fail with that text
CRASHES: list[tuple[str, Callable[[Path], Path]]] = [
    ("PK417", _write("phi3", drop_tensors=["output.weight"])),
    ("PK418", _write("qwen2", drop_tensors=["blk.1.attn_q.bias"])),
    ("PK401", _write("qwen3", drop_keys=["freq_base"])),
    ("PK401", _write("gemma3", drop_keys=["gemma3.attention.sliding_window"])),
    ("PK401", _write("phi3", drop_keys=["feed_forward_length"])),
    ("PK401", _write("qwen2", override={"qwen2.block_count": (2, GGUFValueType.UINT64)})),
    ("PK419", _mixtral_merged),
]


def _load(path: Path):
    return pn.GgufRunner(str(path), device="cpu", loader=loader_for(architecture_of(read_gguf(path))))


@pytest.mark.parametrize("code,make", CRASHES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CRASHES)])
def test_crash_prediction_matches_candle(code: str, make: Callable[[Path], Path], tmp_path: Path) -> None:
    path = make(tmp_path)
    r = lint_paths([path], Settings(select=[code], preview=True, respect_pyproject=False))
    assert not r.errors, r.errors
    expects = [f.probe.expect for f in r.findings if f.code == code]
    assert expects and expects[0], f"{code}: lint predicted no failure for {path.name}"
    with pytest.raises((pn.CandleError, pn.CandlePanic)) as e:
        _load(path)
    assert expects[0] in str(e.value), f"{code}: lint predicted {expects[0]!r}; candle said {e.value}"


@pytest.mark.parametrize("family", ["qwen2", "qwen3", "gemma3", "phi3", "mistral"])
def test_converter_files_load_in_their_loader(family: str, tmp_path: Path) -> None:
    """The negative control: the same files, nothing dropped, load and produce finite logits."""
    path = write_gguf(family_fixture(family, "legacy"), tmp_path / f"{family}.gguf")
    logits = np.asarray(_load(path).last_logits(IDS))
    assert logits.shape == (256,) and np.isfinite(logits).all()


def test_per_expert_mixtral_file_loads(tmp_path: Path) -> None:
    d, _ = mixtral_gguf(merged=False)(tmp_path / "m")
    _load(next(d.glob("*.gguf")))  # zeros, but every tensor candle asks for is there
