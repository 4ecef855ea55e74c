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
        assert (model_type in S.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS) == (
            model_type in auto.MODELS_WITH_INCORRECT_HUB_TOKENIZER_CLASS
        )


def test_which_classes_rebuild_is_transformers() -> None:
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    for name in S.AS_IS | set(S._ALIASES):
        cls = auto.tokenizer_class_from_name(name)
        assert cls is TokenizersBackend or "__init__" not in cls.__dict__ or name == "PythonBackend", name
    for name in set(S.REBUILDS) | S.REBUILDS_UNMIRRORED:
        cls = auto.tokenizer_class_from_name(name)
        assert cls is not None and cls.__name__ == name and "__init__" in cls.__dict__, name


CLASSES = (
    None,
    "LlamaTokenizer",
    "LlamaTokenizerFast",
    "PreTrainedTokenizerFast",
    "TokenizersBackend",
    "GPT2Tokenizer",
    "Qwen2Tokenizer",
    "CodeGenTokenizer",
    "GemmaTokenizerFast",
    "GPTNeoXTokenizer",
)
# every model type of a family portkit covers whose registered class differs, and gpt_neox/olmo (GPTNeoXTokenizer)
MODEL_TYPES = (
    None,
    "llama",
    "mistral",
    "phi3",
    "qwen2",
    "qwen3",
    "starcoder2",
    "gemma",
    "gemma3",
    "stablelm",
    "olmo2",
    "granite",
    "gpt_neox",
    "olmo",
)


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
                assert not choice.known or choice.name not in S.REBUILDS, (
                    f"{cls}/{model_type}: transformers refused ({e}), portkit predicted {choice}"
                )
                continue
            assert choice.name == got, (
                f"tokenizer_class={cls} model_type={model_type}: portkit {choice.name} ({choice.why}), transformers "
                f"{got}"
            )
            checked += 1
    assert checked >= 100


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
        ("gemma", {}),
        ("gemma", {"bos_token": None, "eos_token": None}),
        ("neox", {}),
        ("neox", {"add_prefix_space": True, "trim_offsets": False}),
        ("neox", {"add_eos_token": True, "bos_token": None, "eos_token": None}),
    ],
)
def test_rebuilt_pipeline_is_transformers(
    shape: str, overrides: dict[str, Any], shapes: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
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
    if mirror.rebuilt.post_processor is not None:  # rebuilt (GPTNeoXTokenizer)
        assert mirror.rebuilt.post_processor == _state(backend.post_processor)
    else:  # tokenizer.json's
        assert S.canonical(crate.post_processor) == S.canonical(_state(backend.post_processor))
    assert S.special_template(mirror.post_processor(crate)) == S.special_template(_state(backend.post_processor))
    assert mirror.eos_token == t.eos_token and mirror.bos_token == t.bos_token


def test_as_is_classes_keep_the_files_pipeline(shapes: dict[tuple[str, str], Path]) -> None:
    for s in SHAPES:
        d = shapes[(s, "clean")]
        t = AutoTokenizer.from_pretrained(d)
        tj = read_tokenizer_json(d / "tokenizer.json")
        assert type(t).__name__ == "TokenizersBackend"
        for key, comp in (
            ("normalizer", t.backend_tokenizer.normalizer),
            ("pre_tokenizer", t.backend_tokenizer.pre_tokenizer),
            ("decoder", t.backend_tokenizer.decoder),
        ):
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
def test_crate_refusals_are_predicted_with_the_crates_message(
    indent: int | None, shapes: dict[tuple[str, str], Path]
) -> None:
    """The message lint predicts is the crate's, up to serde's position suffix."""
    doc = json.loads((shapes[("llama2", "trigger")] / "tokenizer.json").read_text())
    for what, bad in _broken(doc):
        text = json.dumps(bad, indent=indent, ensure_ascii=False)
        predicted = S.crate_refusal(parse_tokenizer_json(Path("tokenizer.json"), text))
        with pytest.raises(pn.TokenizerError) as err:
            pn.Tokenizer.from_str(text)
        assert predicted is not None, f"{what}: the crate refuses ({err.value}) but portkit predicts nothing"
        assert re.fullmatch(re.escape(predicted) + r" at line \d+ column \d+", str(err.value)), (
            what,
            predicted,
            str(err.value),
        )


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

        def strip(x):
            return {k: (dict(val, vocab=None, merges=None) if k == "model" else val) for k, val in x.value.items()}

        assert strip(fast) == strip(full), (s, v)


def _corpus_ids(tok: Any) -> list[list[int]]:
    from portkit.verify.corpus import corpus

    return [
        list(tok.encode(s.text, special))
        for s in corpus(["<bos>", "<start_of_turn>"], None)
        for special in (True, False)
    ]


def test_gemmas_split_on_space_is_a_no_op_after_its_replace(shapes: dict[tuple[str, str], Path]) -> None:
    """`GemmaTokenizer` splits on " " after a normalizer that leaves none (tokenization_gemma.py:91-98):
    the crate gives the same ids with and without that Split, so portkit reads both layouts as one;
    a Split on what the Replace writes ("▁") does change ids, and portkit keeps it."""
    doc = json.loads((shapes[("gemma", "clean")] / "tokenizer.json").read_text())
    split = doc["pre_tokenizer"]
    assert split["type"] == "Split" and split["pattern"] == {"String": " "}
    with_split = _corpus_ids(pn.Tokenizer.from_str(json.dumps(doc)))
    assert with_split == _corpus_ids(pn.Tokenizer.from_str(json.dumps({**doc, "pre_tokenizer": None})))
    assert S.pre_tokenizer_steps(doc["normalizer"], split) == []
    # the negative control: a Split on "▁" cuts the normalized text into words
    on_meta = {**split, "pattern": {"String": "▁"}}
    assert _corpus_ids(pn.Tokenizer.from_str(json.dumps({**doc, "pre_tokenizer": on_meta}))) != with_split
    assert S.pre_tokenizer_steps(doc["normalizer"], on_meta) == S.canonical(on_meta)
    assert S.pre_tokenizer_steps(None, split) == S.canonical(split)
    nfkc_after = {
        "type": "Sequence",
        "normalizers": [doc["normalizer"], {"type": "NFKC"}],
    }  # NFKC turns U+00A0 into " "
    assert S.pre_tokenizer_steps(nfkc_after, split) == S.canonical(split)


def _gemma_layouts(shapes: dict[tuple[str, str], Path], tmp_path: Path) -> dict[str, Path]:
    """Gemma files as published and as transformers 5 saves them, all under `GemmaTokenizer`:
    Gemma 1/2 (no pre-tokenizer), Gemma 3 (the Split on " "), and `save_pretrained` of the class."""
    out = {}
    for name, pre in (("gemma-1-2", None), ("gemma-3", "keep")):
        d = tmp_path / name
        shutil.copytree(shapes[("gemma", "clean")], d)
        doc = json.loads((d / "tokenizer.json").read_text())
        if pre is None:
            doc["pre_tokenizer"] = None
        (d / "tokenizer.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False))
        tc = json.loads((d / "tokenizer_config.json").read_text())
        (d / "tokenizer_config.json").write_text(json.dumps({**tc, "tokenizer_class": "GemmaTokenizer"}))
        out[name] = d
    AutoTokenizer.from_pretrained(shapes[("gemma", "trigger")]).save_pretrained(tmp_path / "saved")
    out["transformers-5-save"] = tmp_path / "saved"
    return out


def test_gemmas_own_layouts_differ_nowhere(shapes: dict[tuple[str, str], Path], tmp_path: Path) -> None:
    """The mirror reports nothing on Gemma's published layouts, and the two sides agree on every id."""
    from portkit.verify.sections.tokens import tokenizer_section

    for name, d in _gemma_layouts(shapes, tmp_path).items():
        tj = read_tokenizer_json(d / "tokenizer.json")
        tc = json.loads((d / "tokenizer_config.json").read_text())
        crate = S.crate_tokenizer(tj)
        mirror = S.transformers_tokenizer(crate, tc, None, None, tj.text)
        assert mirror.choice.name == "GemmaTokenizer" and S.differences(crate, mirror) == [], name
        sec = tokenizer_section(d, [])
        assert sec is not None and sec.transformers_class == "GemmaTokenizer" and len(sec.encodes) >= 30, name
        assert not sec.differing and not sec.decode_differs, (name, sec.first)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_transformers_5_save_reads_as_its_own_pipeline(
    shape: str, shapes: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    """`save_pretrained` writes the pipeline the class built into tokenizer.json and keeps the
    class's name: reloaded, the class rebuilds the same pipeline, and the mirror sees no difference.
    Except `legacy: true` (mistral): the save drops `legacy`, so the reload builds
    `prepend_scheme="first"` over the saved "always", and the ids after a special token differ."""
    t = AutoTokenizer.from_pretrained(shapes[(shape, "trigger")])
    saved = tmp_path / "saved"
    t.save_pretrained(saved)
    tj = read_tokenizer_json(saved / "tokenizer.json")
    tc = json.loads((saved / "tokenizer_config.json").read_text())
    crate = S.crate_tokenizer(tj)
    mirror = S.transformers_tokenizer(crate, tc, None, None, tj.text)
    reloaded = AutoTokenizer.from_pretrained(saved)
    assert mirror.choice.name == type(t).__name__ == type(reloaded).__name__
    parts = [d.part for d in S.differences(crate, mirror)]
    assert parts == (["prepend_scheme"] if shape == "mistral" else []), parts
    if shape in ("llama2", "mistral"):  # the text right after `</s>`: "▁world" in the crate only when the schemes part
        text = "Hello</s>world"
        crate_ids = list(pn.Tokenizer.from_file(saved / "tokenizer.json").encode(text, False))
        assert (crate_ids == reloaded.encode(text, add_special_tokens=False)) == (shape == "llama2")


def test_a_preloaded_crate_tokenizer_is_the_one_the_section_uses(
    shapes: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    """verify loads the crate's tokenizer while transformers computes (`preload_crate`): the
    section with it is the section without it, and it is the one used (a preloaded refusal shows)."""
    from portkit.verify.sections.tokens import preload_crate, tokenizer_section

    d = next(iter(_gemma_layouts(shapes, tmp_path).values()))
    loaded = tokenizer_section(d, [])
    preloaded = tokenizer_section(d, [], preloaded=preload_crate(d))
    assert loaded is not None and preloaded is not None and loaded.encodes and preloaded.encodes == loaded.encodes
    refused = tokenizer_section(d, [], preloaded=(None, "the crate refused it"))
    assert refused is not None and refused.crate_error == "the crate refused it" and not refused.encodes
    assert preload_crate(tmp_path / "no tokenizer") is None
