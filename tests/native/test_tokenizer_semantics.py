"""portkit.semantics.tokenizer against the two things it mirrors: transformers 5 (the class
`AutoTokenizer` picks and the pipeline it builds) and the tokenizers crate candle uses (what it
refuses, with its message). Lint never runs either; these tests run both."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import portkit_native as pn
from fixtures.tokenizer_shapes import SHAPES, write_tokenizer
from portkit.model.tokenizer_files import parse_tokenizer_json, read_tokenizer_json
from portkit.semantics import tokenizer as S

transformers = pytest.importorskip("transformers")
from transformers import AutoTokenizer  # noqa: E402
from transformers.models.auto import tokenization_auto as auto  # noqa: E402

transformers.logging.set_verbosity_error()


@pytest.fixture(scope="module")
def shapes(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    root = tmp_path_factory.mktemp("shapes")
    return {(s, v): write_tokenizer(root / f"{s}-{v}", s, v) for s in SHAPES for v in ("trigger", "clean")}  # type: ignore[arg-type]


def _state(component: Any) -> Any:
    return None if component is None else json.loads(component.__getstate__())


def test_mapping_table_is_transformers(shapes: dict[tuple[str, str], Path]) -> None:
    from transformers.utils import is_mistral_common_available

    for model_type, name in S.TOKENIZER_MAPPING_NAMES.items():
        if model_type in ("mistral", "mixtral") and is_mistral_common_available():
            continue
        assert auto.TOKENIZER_MAPPING_NAMES.get(model_type) == name, model_type
    for model_type in ("llama", "falcon"):  # no entry: the hub class decides
        assert auto.TOKENIZER_MAPPING_NAMES.get(model_type) is None and model_type not in S.TOKENIZER_MAPPING_NAMES
    assert S.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS <= auto.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS
    for model_type in S.TOKENIZER_MAPPING_NAMES:
        assert (model_type in S.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS) == (model_type in auto.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS)


def test_which_classes_rebuild_is_transformers() -> None:
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    for name in S.AS_IS | set(S._ALIASES):
        cls = auto.tokenizer_class_from_name(name)
        assert cls is TokenizersBackend or "__init__" not in cls.__dict__ or name == "PythonBackend", name
    for name in set(S.REBUILDS) | S.REBUILDS_UNMIRRORED:
        cls = auto.tokenizer_class_from_name(name)
        assert cls is not None and cls.__name__ == name and "__init__" in cls.__dict__, name


CLASSES = (None, "LlamaTokenizer", "LlamaTokenizerFast", "PreTrainedTokenizerFast", "TokenizersBackend", "GPT2Tokenizer", "Qwen2Tokenizer", "CodeGenTokenizer")
MODEL_TYPES = (None, "llama", "mistral", "phi3", "qwen2", "qwen3", "starcoder2", "gemma")


@pytest.mark.parametrize("shape", ["llama2", "llama3"])
def test_class_choice_is_autotokenizers(shape: str, shapes: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    """Every (tokenizer_class, model_type) pair on an SPM and a byte-level file: the class
    portkit predicts is the class AutoTokenizer instantiates."""
    src = shapes[(shape, "trigger")]
    text = (src / "tokenizer.json").read_text(encoding="utf-8")
    checked = 0
    for cls in CLASSES:
        for model_type in MODEL_TYPES:
            d = tmp_path / f"{cls}-{model_type}"
            shutil.copytree(src, d)
            tc = json.loads((d / "tokenizer_config.json").read_text())
            tc.pop("tokenizer_class", None)
            if cls:
                tc["tokenizer_class"] = cls
            (d / "tokenizer_config.json").write_text(json.dumps(tc))
            config = {"model_type": model_type} if model_type else None
            if config:
                (d / "config.json").write_text(json.dumps(config))
            choice = S.choose_class(tc, config, text)
            try:
                got = type(AutoTokenizer.from_pretrained(d)).__name__
            except Exception as e:  # noqa: BLE001 - transformers refuses some pairs; portkit has no claim there
                assert not choice.known or choice.name not in S.REBUILDS, f"{cls}/{model_type}: transformers refused ({e}), portkit predicted {choice}"
                continue
            assert choice.name == got, f"tokenizer_class={cls} model_type={model_type}: portkit {choice.name} ({choice.why}), transformers {got}"
            checked += 1
    assert checked >= 50


@pytest.mark.parametrize(
    "shape,overrides",
    [
        ("llama2", {}),
        ("llama2", {"legacy": True}),
        ("llama2", {"legacy": None}),
        ("llama2", {"add_prefix_space": False}),
        ("smollm", {}),
        ("smollm", {"add_prefix_space": True}),
        ("qwen2", {}),
        ("qwen2", {"tokenizer_class": "CodeGenTokenizer"}),
    ],
)
def test_rebuilt_pipeline_is_transformers(shape: str, overrides: dict[str, Any], shapes: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    d = tmp_path / "t"
    shutil.copytree(shapes[(shape, "trigger")], d)
    tc = json.loads((d / "tokenizer_config.json").read_text())
    for k, v in overrides.items():
        if v is None:
            tc.pop(k, None)
        else:
            tc[k] = v
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    tj = read_tokenizer_json(d / "tokenizer.json")
    crate = S.crate_tokenizer(tj)
    mirror = S.transformers_tokenizer(crate, tc, None, None, tj.text)
    t = AutoTokenizer.from_pretrained(d)
    assert mirror.choice.name == type(t).__name__ and mirror.rebuilt is not None
    backend = t.backend_tokenizer
    assert mirror.rebuilt.normalizer == _state(backend.normalizer)
    assert mirror.rebuilt.pre_tokenizer == _state(backend.pre_tokenizer)
    assert mirror.rebuilt.decoder == _state(backend.decoder)
    assert mirror.eos_token == t.eos_token and mirror.bos_token == t.bos_token


def test_as_is_classes_keep_the_files_pipeline(shapes: dict[tuple[str, str], Path]) -> None:
    for s in SHAPES:
        d = shapes[(s, "clean")]
        t = AutoTokenizer.from_pretrained(d)
        tj = read_tokenizer_json(d / "tokenizer.json")
        assert type(t).__name__ == "TokenizersBackend"
        for key, comp in (("normalizer", t.backend_tokenizer.normalizer), ("pre_tokenizer", t.backend_tokenizer.pre_tokenizer), ("decoder", t.backend_tokenizer.decoder)):
            assert S.canonical(tj.value[key]) == S.canonical(_state(comp)), (s, key)


def _broken(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    merges = doc["model"]["merges"]
    return [
        ("three spaces", {**doc, "model": {**doc["model"], "merges": merges[:3] + ["   "] + merges[3:]}}),
        ("no space", {**doc, "model": {**doc["model"], "merges": merges[:7] + ["abc"] + merges[7:]}}),
        ("version", {**doc, "version": "2.0"}),
        ("model type", {**doc, "model": {**doc["model"], "type": "Bogus"}}),
        ("no model", {k: v for k, v in doc.items() if k != "model"}),
        ("no merges", {**doc, "model": {k: v for k, v in doc["model"].items() if k != "merges"}}),
        ("normalizer", {**doc, "normalizer": {"type": "Sequence", "normalizers": [{"type": "Bogus"}]}}),
        ("pre_tokenizer", {**doc, "pre_tokenizer": {"type": "Bogus"}}),
        ("decoder", {**doc, "decoder": {"type": "Bogus"}}),
        ("post_processor", {**doc, "post_processor": {"type": "Bogus"}}),
    ]


@pytest.mark.parametrize("indent", [2, None])
def test_crate_refusals_are_predicted_with_the_crates_message(indent: int | None, shapes: dict[tuple[str, str], Path]) -> None:
    """The message lint predicts is the crate's, up to serde's position suffix."""
    doc = json.loads((shapes[("llama2", "trigger")] / "tokenizer.json").read_text())
    for what, bad in _broken(doc):
        text = json.dumps(bad, indent=indent, ensure_ascii=False)
        predicted = S.crate_refusal(parse_tokenizer_json(Path("tokenizer.json"), text))
        with pytest.raises(pn.TokenizerError) as err:
            pn.Tokenizer.from_str(text)
        assert predicted is not None, f"{what}: the crate refuses ({err.value}) but portkit predicts nothing"
        assert re.fullmatch(re.escape(predicted) + r" at line \d+ column \d+", str(err.value)), (what, predicted, str(err.value))


def test_every_shape_loads_in_the_crate_and_nothing_is_predicted(shapes: dict[tuple[str, str], Path]) -> None:
    for (s, v), d in shapes.items():
        pn.Tokenizer.from_file(d / "tokenizer.json")
        assert S.crate_refusal(read_tokenizer_json(d / "tokenizer.json")) is None, (s, v)


def test_fast_path_reads_what_a_full_parse_reads(shapes: dict[tuple[str, str], Path]) -> None:
    for (s, v), d in shapes.items():
        text = (d / "tokenizer.json").read_text(encoding="utf-8")
        fast, full = parse_tokenizer_json(d, text), parse_tokenizer_json(d, text, fast=False)
        assert fast.vocab_span is not None and full.vocab_span is None, (s, v)
        assert fast.vocab() == full.vocab() and fast.merges() == full.merges(), (s, v)
        strip = lambda x: {k: (dict(val, vocab=None, merges=None) if k == "model" else val) for k, val in x.value.items()}  # noqa: E731
        assert strip(fast) == strip(full), (s, v)
