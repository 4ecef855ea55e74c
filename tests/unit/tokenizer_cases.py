"""PK5xx cases: tokenizer directories in the shapes real checkpoints publish (fixtures.tokenizer_shapes),
each a triggering variant and a clean one (a transformers 5 save), plus edits for the rules no
shape triggers on its own. Merged into tests.unit.rule_cases."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fixtures.tokenizer_shapes import write_tokenizer

Builder = Callable[[Path], tuple[Path, dict[str, Any]]]
Edit = Callable[[dict[str, Any]], None]


def shape(
    name: str,
    variant: str = "trigger",
    *,
    tokenizer: Edit | None = None,
    config: Edit | None = None,
    generation: Edit | None = None,
    files: dict[str, Any] | None = None,
    target: dict[str, Any] | None = None,
) -> Builder:
    """A shape's tokenizer files, edited: `tokenizer`/`config`/`generation` change tokenizer.json,
    tokenizer_config.json and generation_config.json in place; `files` adds or replaces files
    (None removes one); `target`: lint's target (`--sampler`, ...)."""

    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        write_tokenizer(root, name, variant)  # type: ignore[arg-type]
        for fname, edit in (
            ("tokenizer.json", tokenizer),
            ("tokenizer_config.json", config),
            ("generation_config.json", generation),
        ):
            if edit is not None:
                p = root / fname
                doc = json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}
                edit(doc)
                p.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        for fname, value in (files or {}).items():
            if value is None:
                (root / fname).unlink(missing_ok=True)
            else:
                (root / fname).write_text(
                    value if isinstance(value, str) else json.dumps(value, indent=2), encoding="utf-8"
                )
        return root, dict(target or {})

    return b


def _set(**kv: Any) -> Edit:
    return lambda d: d.update(kv)


def _bad_merge(d: dict[str, Any]) -> None:
    d["model"]["merges"] = d["model"]["merges"][:5] + ["   "] + d["model"]["merges"][5:]


def _linebreak_escape(d: dict[str, Any]) -> None:
    """`\\R` (any line break) in the Split pattern: onig reads it, fancy-regex (candle 0.11.1) does not."""
    split = d["pre_tokenizer"]["pretokenizers"][0]
    split["pattern"]["Regex"] = "\\R+|" + split["pattern"]["Regex"]


def _decoder_metaspace(d: dict[str, Any]) -> None:
    d["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}


def _metaspace_file(d: dict[str, Any]) -> None:
    """The pipeline the Llama converter writes with `legacy: false`: no normalizer, a Metaspace."""
    d.update(
        normalizer=None,
        pre_tokenizer={"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
    )


NEOX_BYTE_LEVEL_POST = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def _normalized_decoder(d: dict[str, Any]) -> None:
    d["tokenizer_class"] = "TokenizersBackend"
    d["added_tokens_decoder"] = {
        str(i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": True,
        }
        for i, t in enumerate(("<unk>", "<s>", "</s>"))
    }


TOKENIZER_CASES: dict[str, tuple[Builder, Builder]] = {
    "PK501": (shape("llama2"), shape("llama2", "clean")),
    "PK502": (shape("phi3"), shape("phi3", "clean")),
    "PK503": (shape("smollm"), shape("smollm", "clean")),
    # the transformers 5 save with the class name put back and the decoder of another file
    "PK504": (
        shape("llama2", "clean", tokenizer=_decoder_metaspace, config=_set(tokenizer_class="LlamaTokenizer")),
        shape("llama2", "clean"),
    ),
    "PK505": (shape("llama2"), shape("llama2", "clean")),
    "PK506": (shape("smollm"), shape("smollm", "clean")),
    "PK507": (shape("llama2", tokenizer=_bad_merge), shape("llama2")),
    "PK508": (shape("llama3"), shape("llama3", "clean")),
    "PK509": (shape("mistral"), shape("mistral", "clean")),
    "PK510": (shape("llama3"), shape("llama3", "clean")),
    "PK511": (shape("neox"), shape("neox", "clean")),
}

TOKENIZER_VARIANTS: list[tuple[str, Builder, str]] = [
    ("PK501", shape("qwen2"), "which normalizes with `NFC`; candle's tokenizers crate runs none"),
    (
        "PK501",
        shape("llama2"),
        "`LlamaTokenizer` (tokenizer_config.json names `LlamaTokenizer`), which uses no normalizer",
    ),
    ("PK501", shape("mistral"), '`Prepend("▁") + Replace(" " -> "▁")`'),
    # loaded as is, but tokenizer_config.json's added_tokens_decoder matches `<s>` on the raw text
    (
        "PK505",
        shape("llama2", config=_normalized_decoder),
        "`added_tokens_decoder` has transformers match them on the raw text",
    ),
    ("PK505", shape("llama2"), "special tokens `<unk>`, `<s>` are `normalized: true`"),
    ("PK506", shape("smollm", tokenizer=_set(truncation=None)), "saves padding (to 48 with `<|im_end|>`):"),
    ("PK506", shape("smollm", tokenizer=_set(padding=None)), "saves truncation (at 48):"),
    ("PK507", shape("llama2", tokenizer=_bad_merge), "`Merges text file invalid at line 6`"),
    ("PK507", shape("llama2", tokenizer=_set(version="2.0")), "`Unknown tokenizer version '2.0'`"),
    ("PK507", shape("llama2", tokenizer=lambda d: d["model"].update(type="Bogus")), "untagged enum ModelUntagged"),
    ("PK507", shape("llama2", tokenizer=_set(normalizer={"type": "Bogus"})), "untagged enum NormalizerUntagged"),
    (
        "PK507",
        shape("llama3", "clean", tokenizer=_linebreak_escape),
        "the tokenizers crate 0.23.2 that candle 0.11.1 uses refuses tokenizer.json: "
        "`Parsing error at position 0: Invalid escape: \\R`",
    ),
    ("PK507", shape("llama2", tokenizer=_bad_merge, target={"candle": "0.9.1"}), "crate 0.21.4 that candle 0.9.1"),
    ("PK508", shape("phi3"), "`<|endoftext|>` is"),
    # the eos list in config.json alone (no generation_config.json): generate() reads config.json's
    (
        "PK508",
        shape(
            "qwen2",
            files={"generation_config.json": None, "config.json": {"model_type": "qwen3", "eos_token_id": [476, 474]}},
        ),
        "(config.json)",
    ),
    ("PK509", shape("llama3"), "`{{ bos_token }}`"),
    (
        "PK509",
        shape(
            "llama3",
            config=lambda d: d.pop("chat_template"),
            files={"chat_template.jinja": "<|begin_of_text|>{{ messages[0]['content'] }}"},
        ),
        "writes `<|begin_of_text|>`",
    ),
    (
        "PK510",
        shape("llama3", generation=_set(do_sample=False, repetition_penalty=1.1)),
        "penalises only the last 64 tokens",
    ),
    # the Llama-3 shape (do_sample, 0.6, 0.9, no top_k): generate()'s implicit top-k
    ("PK510", shape("llama3"), "fills `top_k`=50 into every generation config"),
    (
        "PK510",
        shape("llama3", generation=_set(top_k=20, top_p=0.8)),
        "`Sampling::TopKThenTopP` applies its top-p 0.8 to the top 20",
    ),
    ("PK510", shape("llama3", generation=_set(min_p=0.05)), "`min_p`=0.05: candle's LogitsProcessor has no equivalent"),
    (
        "PK510",
        shape("llama3", target={"sampler": "candle-examples"}),
        "`LogitsProcessor::new(seed, None, None)` decodes greedily",
    ),
    (
        "PK510",
        shape("llama3", target={"sampler": "candle-examples"}),
        "the candle program applies `apply_repeat_penalty` 1.1 over the last 64 tokens",
    ),
    # a Llama 2 file named Qwen2Tokenizer beside a qwen3 config: the hub class stands
    (
        "PK501",
        shape("llama2", files={"config.json": {"model_type": "qwen3"}}, config=_set(tokenizer_class="Qwen2Tokenizer")),
        "`Qwen2Tokenizer`",
    ),
    # qwen2's hub class is overridden by the class its model_type registers (tokenization_auto.py:392, :866-910)
    (
        "PK501",
        shape(
            "qwen2",
            files={"config.json": {"model_type": "qwen2"}},
            config=_set(tokenizer_class="PreTrainedTokenizerFast"),
        ),
        "config.json's `model_type` `qwen2` registers `Qwen2Tokenizer`",
    ),
    # GemmaTokenizer (models/gemma/tokenization_gemma.py:91-98) over a file from the Llama converter
    (
        "PK501",
        shape("gemma"),
        '`GemmaTokenizer` (tokenizer_config.json names `GemmaTokenizer`), which normalizes with `Replace(" " -> "▁")`',
    ),
    ("PK501", shape("gemma"), 'candle puts "▁" before the text and after each special token'),
    ("PK504", shape("gemma"), 'which decodes with `Replace("▁" -> " ") + ByteFallback + Fuse`;'),
    (
        "PK501",
        shape("gemma", config=_set(tokenizer_class=None), files={"config.json": {"model_type": "gemma3"}}),
        "config.json's `model_type` `gemma3` registers `GemmaTokenizer`",
    ),
    (
        "PK503",
        shape("gemma", "clean", tokenizer=_metaspace_file, config=_set(tokenizer_class="GemmaTokenizer")),
        "drops tokenizer.json's `Metaspace(",
    ),
    ("PK508", shape("gemma"), "never stops on"),
    ("PK509", shape("gemma"), "adds `<bos>` too"),
    # GPTNeoXTokenizer (models/gpt_neox/tokenization_gpt_neox.py:126-148)
    ("PK511", shape("neox"), "candle puts `<|endoftext|>` after the text"),
    (
        "PK511",
        shape("neox", config=_set(tokenizer_class=None), files={"config.json": {"model_type": "olmo"}}),
        "config.json's `model_type` `olmo` registers",
    ),
    (
        "PK501",
        shape("neox", "clean", tokenizer=_set(normalizer=None), config=_set(tokenizer_class="GPTNeoXTokenizer")),
        "which normalizes with `NFC`",
    ),
    (
        "PK503",
        shape("neox", config=_set(add_prefix_space=True)),
        "uses `ByteLevel(add_prefix_space=true, use_regex=true)` instead",
    ),
]

TOKENIZER_CLEAN_VARIANTS: list[tuple[str, Builder]] = [
    # phi3 model_type: transformers loads tokenizer.json as is (tokenization_auto.py:866-910)
    ("PK501", shape("phi3", files={"config.json": {"model_type": "phi3"}})),
    ("PK502", shape("phi3", files={"config.json": {"model_type": "phi3"}})),
    # legacy true: "always" on both sides
    ("PK502", shape("mistral")),
    # a LlamaTokenizer declared over a byte-level file loads as is (tokenization_auto.py:846-862)
    ("PK503", shape("llama3", config=_set(tokenizer_class="LlamaTokenizerFast"))),
    ("PK501", shape("llama3", config=_set(tokenizer_class="LlamaTokenizerFast"))),
    # no normalizer: a normalized special token is matched on the text itself
    ("PK505", shape("llama2", "clean", tokenizer=lambda d: d["added_tokens"][1].update(normalized=True))),
    # TokenizersBackend without added_tokens_decoder: both sides read the same flags
    ("PK505", shape("llama2", config=_set(tokenizer_class="TokenizersBackend"))),
    ("PK507", shape("smollm")),  # merges as pairs
    # onig (candle 0.11.0) reads `\\R`
    ("PK507", shape("llama3", "clean", tokenizer=_linebreak_escape, target={"candle": "0.11.0"})),
    ("PK508", shape("llama3", generation=_set(eos_token_id=479))),
    ("PK509", shape("phi3")),  # its template writes no BOS
    ("PK509", shape("llama3", tokenizer=_set(post_processor=None))),
    ("PK510", shape("llama3", generation=_set(do_sample=False))),  # greedy: temperature and top_p unused
    # the call portkit advises for the Llama-3 shape, stated
    ("PK510", shape("llama3", target={"sampler": "sampling=TopP, temperature=0.6, top_p=0.9, top_k_renormalised=50"})),
    # Gemma's own layouts under GemmaTokenizer: Gemma 1/2 (no pre-tokenizer) and Gemma 3 (a Split on
    # " " after the Replace, which leaves no space: a no-op), as transformers 5 saves them too
    *[
        (c, shape("gemma", "clean", tokenizer=_set(pre_tokenizer=None), config=_set(tokenizer_class="GemmaTokenizer")))
        for c in ("PK501", "PK503", "PK504")
    ],
    *[
        (c, shape("gemma", "clean", config=_set(tokenizer_class="GemmaTokenizerFast")))
        for c in ("PK501", "PK503", "PK504")
    ],
    # GPT-NeoX-20B's post-processor (ByteLevel) adds no token either
    ("PK511", shape("neox", tokenizer=_set(post_processor=NEOX_BYTE_LEVEL_POST))),
    *[
        (c, shape("neox", "clean", config=_set(tokenizer_class="GPTNeoXTokenizer")))
        for c in ("PK501", "PK503", "PK504", "PK511")
    ],
    # a stablelm / olmo2 / granite config.json registers TokenizersBackend: tokenizer.json loads as is
    # whatever class the hub names (tokenization_auto.py:866-911)
    *[("PK511", shape("neox", files={"config.json": {"model_type": t}})) for t in ("stablelm", "olmo2", "granite")],
]


# --------------------------------------------------------------------------- the chat template in Rust (PK512-PK518)


def chat(
    name: str | None = None, variant: str = "trigger", *, text: str | None = None, in_config: bool = False
) -> Builder:
    """fixtures.chat_templates' named template (or `text`) over the qwen2 clean shape, as
    chat_template.jinja or as tokenizer_config.json's `chat_template`."""

    def b(root: Path) -> tuple[Path, dict[str, Any]]:
        from fixtures.chat_templates import template, write_chat_template

        write_chat_template(root, name or "python-method", variant)  # type: ignore[arg-type]
        body = text if text is not None else template(name or "python-method", variant)  # type: ignore[arg-type]
        if in_config:
            (root / "chat_template.jinja").unlink()
            p = root / "tokenizer_config.json"
            doc = json.loads(p.read_text(encoding="utf-8"))
            doc["chat_template"] = body
            p.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        else:
            (root / "chat_template.jinja").write_text(body, encoding="utf-8")
        return root, {}

    return b


CHAT_CASES = {
    "PK512": "python-method",
    "PK513": "generation",
    "PK514": "loop-control",
    "PK515": "descending-range",
    "PK516": "tojson",
    "PK517": "strftime",
    "PK518": "whitespace",
}
TOKENIZER_CASES.update({code: (chat(name), chat(name, "clean")) for code, name in CHAT_CASES.items()})

TOKENIZER_VARIANTS += [
    ("PK512", chat(text="{{- messages[0]['content'].zfill(3) }}"), "so does mistral.rs, whose pycompat has no `zfill`"),
    ("PK512", chat(text="{{- messages[0].get('name', '') }}"), "pycompat 2.14.0's `get` takes no default"),
    (
        "PK512",
        chat(text="{%- for m in messages %}\n{{- m['content'].strip() }}{% endfor %}", in_config=True),
        "(template line 2)",
    ),
    ("PK512", chat(text="{{- messages[0]['content'].strip().title() }}"), "`.strip()`, `.title()`"),
    (
        "PK513",
        chat("generation"),
        "candle-examples' minijinja refuses the whole template (`unknown statement generation`)",
    ),
    ("PK514", chat(text="{% for m in messages %}{% continue %}{% endfor %}"), "`{% continue %}`"),
    ("PK515", chat(text="{{- (messages[::-1][0])['content'] }}"), "subscripts a reversed sequence"),
    ("PK515", chat("descending-range"), "rewrites it to `range(messages|length - 1)|reverse`"),
    ("PK516", chat(text="{{- messages | tojson }}"), "candle-examples' minijinja has no `json` feature"),
    ("PK516", chat(text="{{- messages | tojson }}"), "mistral.rs's own `tojson` writes what transformers' does"),
    ("PK516", chat("tojson"), "mistral.rs's `tojson` ignores `sort_keys`"),
    ("PK518", chat(text="{{- 'a' }}\n  {% if true %}b{% endif %}"), "blanks before a block tag (lstrip_blocks)"),
    ("PK518", chat(text="\n{{ 'a' }}"), "whitespace at the start of the render (trim_start)"),
    ("PK518", chat("whitespace"), "at 7 places"),
]

TOKENIZER_CLEAN_VARIANTS += [
    ("PK512", chat(text="{{- 'x.strip()' + messages[0]['content'] }}")),  # inside a string literal
    # a pycompat method only a tool branch reaches: candle-examples never gets there, mistral.rs answers it
    (
        "PK512",
        chat(text="{%- if tools %}{{- tools[0]['function']['name'].strip() }}{% endif %}{{- messages[0]['content'] }}"),
    ),
    ("PK515", chat("reversed")),  # plain `[::-1]`: minijinja 2.10+ and mistral.rs's `|reverse` agree
    ("PK515", chat(text="{%- for i in range(3, 0, -1) %}{{ i }}{% endfor %}")),
    ("PK516", chat("tojson", "clean")),  # `tojson` in a tool branch: candle-examples never runs it
    (
        "PK518",
        chat(text="{%- for m in messages -%}\n  {{- m['content'] }}\n{%- endfor %}\n"),
    ),  # `-` everywhere, a final newline
    *[(code, chat("python-method", "clean")) for code in CHAT_CASES],
]


def _normalized_decoder_kept(d: dict[str, Any]) -> None:
    """tokenizer_config.json whose `added_tokens_decoder` keeps `normalized: true`: transformers matches the
    specials as the crate does (no PK505) and decodes them as the crate 0.23 does (no PK519)."""
    _normalized_decoder(d)
    for entry in d["added_tokens_decoder"].values():
        entry["normalized"] = entry["content"] != "</s>"


def _precompiled(d: dict[str, Any]) -> None:
    d["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": None}


# candle 0.11.1's crate (tokenizers 0.23) decodes a normalized special as its normalized form (PK519)
TOKENIZER_CASES["PK519"] = (shape("llama2"), shape("llama2", "clean"))
TOKENIZER_VARIANTS += [
    ("PK519", shape("llama2"), "`<unk>`, `<s>` are `normalized: true`"),
    ("PK519", shape("llama2"), "makes them `▁<unk>`, `▁<s>`: candle 0.11.1's tokenizers crate decodes them so"),
    ("PK519", shape("llama2"), "keeps them in the text where transformers drops"),
]
TOKENIZER_CLEAN_VARIANTS += [
    ("PK519", shape("llama2", target={"candle": "0.11.0"})),  # tokenizers 0.22.2 decodes the content
    ("PK519", shape("llama2", tokenizer=_set(normalizer={"type": "NFC"}))),  # the normalizer leaves `<s>` as is
    ("PK519", shape("llama2", tokenizer=_precompiled)),  # a charsmap portkit does not mirror: nothing claimed
    # transformers matches them normalized too and decodes with the same crate: `▁<s>` on both sides
    ("PK519", shape("llama2", config=_normalized_decoder_kept)),
]
