"""`forced_and_greedy` is `greedy` and `teacher_forced_logits` bit for bit, on every GGUF loader
(`GgufRunner`) and on `LlamaRunner` (llama.rs's `Cache` copied at the fork): when the fed tokens are candle's own, when
they fork from them (the snapshot of the
KV cache, or quantized_qwen2's second pass), when fewer are fed than tokens asked, and for 0 and
1 tokens."""

from __future__ import annotations

import numpy as np
import pytest

import portkit_native as pn
from fixtures.families import family_fixture
from fixtures.gguf_writer import write_gguf
from portkit.model.gguf_header import read_gguf
from portkit.semantics.gguf import architecture_of, loader_for

PROMPT = [5, 17, 33, 2, 88, 41]
N = 6


@pytest.fixture(scope="module", params=["mistral", "qwen2", "qwen3", "gemma3", "phi3", "llama-safetensors"])
def runner(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    family = request.param
    if family == "llama-safetensors":
        d = family_fixture("llama", "legacy")
        return pn.LlamaRunner([str(d / "model.safetensors")], (d / "config.json").read_text())
    path = write_gguf(family_fixture(family, "legacy"), tmp_path_factory.mktemp(family) / f"{family}.gguf")
    loader = loader_for(architecture_of(read_gguf(path)))
    return pn.GgufRunner(str(path), loader=loader)


def _separate(r, fed: list[int], n: int) -> tuple[list[int], np.ndarray]:
    rows = np.asarray(r.teacher_forced_logits(PROMPT + fed, len(PROMPT)))
    return list(r.greedy(PROMPT, n)), rows


def _cases(own: list[int]) -> dict[str, tuple[list[int], int]]:
    other = (own[2] + 1) % 50
    return {
        "own tokens": (own[: N - 1], N),
        "fork at 2": (own[:2] + [other] + own[3 : N - 1], N),
        "fork at 0": ([(own[0] + 1) % 50] + own[1 : N - 1], N),
        "fewer fed": (own[:2], N),
        "zero tokens": ([], 0),
        "one token": ([], 1),
        "fork, fewer fed": (own[:2] + [other], N),
    }


def test_forced_and_greedy_is_both_calls_bit_for_bit(runner) -> None:
    own = list(runner.greedy(PROMPT, N))
    for name, (fed, n) in _cases(own).items():
        greedy, rows = runner.forced_and_greedy(PROMPT + fed, len(PROMPT), n)
        want_greedy, want_rows = _separate(runner, fed, n)
        assert list(greedy) == want_greedy, name
        got = np.asarray(rows)
        assert got.shape == want_rows.shape and got.tobytes() == want_rows.tobytes(), name


def test_a_bad_prefill_is_refused(runner) -> None:
    with pytest.raises(ValueError, match="prefill must be in"):
        runner.forced_and_greedy(PROMPT, 0, 2)
