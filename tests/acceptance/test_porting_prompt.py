"""The porting kit on hand-written prompts: `portkit reference --chat` records the prompt
transformers' chat template renders and its ids; `portkit compare` checks a candidate's ids
against them before any logits.

The model is a tiny Llama with SmolLM2-Instruct's chat template (a conversation without a system
turn gets its default system prompt) over a ChatML tokenizer; the candidate's ids come from the
prompt candle-examples writes by hand for Qwen-style models, encoded by the tokenizers crate.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from fixtures.chat_templates import HAND_WRITTEN_CHATML, SMOLLM2
from fixtures.tokenizer_shapes import shape_dir
from portkit.cli import main as portkit_main

QUESTION = "Hi! What is 2 + 2?"
DEFAULT_SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(model dir, reference written with --chat)."""
    root = tmp_path_factory.mktemp("smollm2")
    model = root / "model"
    shutil.copytree(shape_dir("qwen2", "clean", with_model=True), model)
    model.chmod(0o755)
    (model / "chat_template.jinja").write_text(SMOLLM2, encoding="utf-8")
    ref = root / "ref.safetensors"
    assert portkit_main(["reference", str(model), "--chat", QUESTION, "--out", str(ref), "--tokens", "2"]) == 0
    return model, ref


def _run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = portkit_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _candidate(path: Path, ids: list[int], logits: np.ndarray) -> Path:
    save_file(
        {"ids": np.asarray(ids, dtype=np.int64), "logits": np.ascontiguousarray(logits, dtype=np.float32)}, str(path)
    )
    return path


def _encode(model: Path, text: str) -> list[int]:
    import portkit_native as pn

    return list(pn.Tokenizer.from_file(str(model / "tokenizer.json")).encode(text, True))


def test_reference_records_the_rendered_prompt(smollm2: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    model, ref = smollm2
    from safetensors import safe_open

    with safe_open(str(ref), "np") as f:
        meta = f.metadata()
        ids = f.get_tensor("ids").tolist()
    prompt = json.loads(meta["prompt"])
    assert prompt["source"] == "--chat" and prompt["text"] == DEFAULT_SYSTEM + HAND_WRITTEN_CHATML.format(
        prompt=QUESTION
    )
    assert prompt["ids"] == ids == _encode(model, prompt["text"])


def test_a_prompt_without_the_default_system_prompt_exits_1_and_shows_both(
    smollm2: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model, ref = smollm2
    logits = load_file(str(ref))["logits"][-1]
    hand = _candidate(
        tmp_path / "hand.safetensors", _encode(model, HAND_WRITTEN_CHATML.format(prompt=QUESTION)), logits
    )
    code, out, err = _run(capsys, "compare", ref, hand)
    assert code == 1, err
    assert "the candidate's prompt is not the reference's: they part at token 1" in out
    assert "'<|im_start|>system\\n" in out and "'<|im_start|>user\\nHi" in out
    assert "last position" not in out and "nothing else compared" in out
    code, out, err = _run(capsys, "compare", ref, hand, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["verdict"] == "mismatch" and doc["comparison"] is None
    ids = doc["ids"]
    assert ids["agree"] is False and ids["first_difference"] == 1
    assert ids["reference"]["text"].startswith("<|im_start|>system") and ids["candidate"]["text"].startswith(
        "<|im_start|>user"
    )


def test_with_the_right_prompt_it_goes_on_to_the_logits(
    smollm2: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model, ref = smollm2
    logits = load_file(str(ref))["logits"][-1]
    right = _encode(model, DEFAULT_SYSTEM + HAND_WRITTEN_CHATML.format(prompt=QUESTION))
    code, out, _ = _run(capsys, "compare", ref, _candidate(tmp_path / "right.safetensors", right, logits))
    assert code == 0 and "last position" in out and "part at token" not in out
    # the negative control: the right ids, logits off by 1e-3
    off = logits.copy()
    off[int(np.argmax(off))] += 1e-3
    code, out, _ = _run(capsys, "compare", ref, _candidate(tmp_path / "off.safetensors", right, off))
    assert code == 1 and "last position" in out and "MISMATCH" in out


def test_one_character_changed_is_a_difference(
    smollm2: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model, ref = smollm2
    logits = load_file(str(ref))["logits"][-1]
    text = DEFAULT_SYSTEM + HAND_WRITTEN_CHATML.format(prompt=QUESTION).replace("Hi!", "Hi ")
    code, out, _ = _run(
        capsys, "compare", ref, _candidate(tmp_path / "space.safetensors", _encode(model, text), logits)
    )
    assert code == 1 and "they part at token" in out


def test_without_a_tokenizer_the_ids_alone_are_shown(
    smollm2: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model, ref = smollm2
    logits = load_file(str(ref))["logits"][-1]
    hand = _candidate(
        tmp_path / "hand.safetensors", _encode(model, HAND_WRITTEN_CHATML.format(prompt=QUESTION)), logits
    )
    code, out, _ = _run(capsys, "compare", ref, hand, "--tokenizer", tmp_path / "nowhere")
    assert code == 1 and "no tokenizer.json" in out and "candidate     [" in out
