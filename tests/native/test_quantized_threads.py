"""verify gives candle's quantized matmuls one thread beside transformers' child
(`share_cores_with_reference`), which is only sound if the thread count changes no number: each
output of candle's quantized matmul is one `vec_dot` of its own, whichever thread computes it.
Pinned here on a Q8_0 GGUF, one process per count (candle sizes its pool once per process), bit
for bit: the same kernels on the same machine. Negative control: another file's logits differ."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixtures.families import family_fixture
from fixtures.gguf_writer import write_gguf
from portkit.verify.candle import native

PROMPT = [5, 17, 33, 2, 88, 41, 7, 19]
DUMP = """
import sys, numpy as np, portkit_native as pn
r = pn.GgufRunner(sys.argv[1], loader="quantized_llama")
np.save(sys.argv[2], np.asarray(r.teacher_forced_logits([int(x) for x in sys.argv[3].split(",")], 3)))
"""


def _logits(gguf: Path, out: Path, threads: str | None) -> np.ndarray:
    env = {k: v for k, v in os.environ.items() if k != native.QUANTIZED_THREADS_ENV}
    if threads is not None:
        env[native.QUANTIZED_THREADS_ENV] = threads
    subprocess.run(
        [sys.executable, "-c", DUMP, str(gguf), str(out), ",".join(map(str, PROMPT))], env=env, check=True, timeout=120
    )
    return np.load(out)


@pytest.fixture(scope="module")
def q8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_gguf(family_fixture("llama", "legacy"), tmp_path_factory.mktemp("q8") / "llama-q8_0.gguf", "q8_0")


def test_one_thread_or_two_give_the_same_logits_bit_for_bit(q8: Path, tmp_path: Path) -> None:
    one = _logits(q8, tmp_path / "one.npy", "1")
    two = _logits(q8, tmp_path / "two.npy", "2")
    assert one.shape[0] == len(PROMPT) - 3 + 1 and np.array_equal(one, two)


def test_negative_control_an_f32_file_of_the_same_model_differs(q8: Path, tmp_path: Path) -> None:
    f32 = write_gguf(family_fixture("llama", "legacy"), tmp_path / "llama-f32.gguf", "f32")
    assert not np.array_equal(_logits(q8, tmp_path / "q8.npy", "1"), _logits(f32, tmp_path / "f32.npy", "1"))


def test_one_thread_beside_the_child_unless_the_user_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(native.QUANTIZED_THREADS_ENV, raising=False)
    native.share_cores_with_reference()
    assert os.environ[native.QUANTIZED_THREADS_ENV] == "1" and native.quantized_threads() == 1
    monkeypatch.setenv(native.QUANTIZED_THREADS_ENV, "3")
    native.share_cores_with_reference()
    assert native.quantized_threads() == 3
    monkeypatch.setenv(native.QUANTIZED_THREADS_ENV, "many")
    assert native.quantized_threads() is None  # unreadable: not reported rather than guessed
