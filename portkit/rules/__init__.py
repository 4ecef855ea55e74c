"""The rule catalogue.

`CODES` is append-only: a code, once published, keeps its name forever; a rule that is
withdrawn stays in the table with status "removed" (ruff's `codes.rs` discipline). Rule
groups own the hundreds: PK1xx config, PK2xx weights, PK3xx runtime, PK4xx gguf, PK5xx tokenizer, PK6xx embedding.
`--select`
and `--ignore` take any prefix (`PK`, `PK1`, `PK10`, `PK101`).

Mostly one module per group rather than one file per rule: the rules of a group share their
helpers (candle's expected tensor table, the GGUF view), and each rule is still one class
whose docstring is its documentation. The tokenizer group is a package with one module per
rule and its shared analysis in a module of its own (`portkit.rules.tokenizer`). ("Group" is
the rule's kind, `Rule.group`, and what code routes on, never the code's digits; a model
*family* is the candle module a checkpoint loads into, `portkit.families`; each rule lists the
families it applies to in `Rule.families`, derived from the family traits where a trait decides.)
"""

from __future__ import annotations

from portkit.rules import (
    config,
    embedding_activation,
    embedding_config,
    embedding_decoder,
    embedding_mask,
    embedding_pipeline,
    embedding_positions,
    gguf,
    runtime,
    runtime_paths,
    tokenizer,
    weights,
)
from portkit.rules.base import DOC_HEADINGS, Context, Rule

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Literal

    Status = Literal["stable", "preview", "removed"]

# code -> (name, status). Append only.
CODES: dict[str, tuple[str, Status]] = {
    "PK101": ("rope-theta-in-rope-parameters", "stable"),
    "PK102": ("rope-scaling-in-rope-parameters", "stable"),
    "PK103": ("rope-scaling-unparseable", "stable"),
    "PK104": ("head-dim-mismatch", "stable"),
    "PK105": ("attention-bias-ignored", "stable"),
    "PK106": ("mlp-bias-ignored", "stable"),
    "PK107": ("hidden-act-not-silu", "stable"),
    "PK108": ("partial-rotary-ignored", "stable"),
    "PK109": ("sliding-window-ignored", "stable"),
    "PK110": ("missing-required-key", "stable"),
    "PK111": ("generation-eos-differs", "stable"),
    "PK112": ("config-refused-by-candle", "stable"),
    # withdrawn: its premise, that candle reads every config with models::llama, is gone (PK114)
    "PK113": ("non-llama-model-type", "removed"),
    "PK114": ("no-candle-module", "stable"),
    "PK115": ("sliding-window-semantics", "stable"),
    "PK116": ("activation-differs", "stable"),
    "PK117": ("hidden-act-and-hidden-activation", "stable"),
    "PK118": ("query-pre-attn-scalar-ignored", "stable"),
    "PK119": ("granite-multipliers-ignored", "stable"),
    "PK120": ("lm-head-ignores-tie", "stable"),
    "PK121": ("gemma3-prefill-needs-one-kv-head", "stable"),
    "PK122": ("bidirectional-attention-ignored", "stable"),
    "PK123": ("softcapping-key-absent", "stable"),
    "PK124": ("no-rope-layers-differ", "stable"),
    "PK125": ("attention-bias-key-absent", "stable"),
    "PK126": ("gemma4-norm-gain-and-scale", "stable"),
    "PK127": ("gemma4-global-head-dim", "stable"),
    "PK128": ("gemma4-per-layer-inputs-ignored", "stable"),
    "PK129": ("gemma4-kv-projections-absent", "stable"),
    "PK130": ("gemma4-moe-block-ignored", "stable"),
    "PK131": ("phi-qk-layernorm-over-all-heads", "stable"),
    "PK201": ("missing-tensor", "stable"),
    "PK202": ("unread-tensor", "stable"),
    "PK203": ("unexpected-tensor", "stable"),
    "PK204": ("layer-count-mismatch", "stable"),
    "PK205": ("lm-head-vs-tie", "stable"),
    "PK206": ("tensor-shape-mismatch", "stable"),
    "PK207": ("unsupported-tensor-dtype", "stable"),
    "PK301": ("bf16-matmul-on-cpu", "stable"),
    "PK302": ("f16-matmul-with-accelerate", "stable"),
    "PK303": ("f16-accumulation-on-cpu", "stable"),
    "PK304": ("cache-dtype-mismatch", "preview"),
    "PK305": ("flash-attn-without-feature", "stable"),
    "PK306": ("sequence-beyond-max-positions", "stable"),
    "PK307": ("softcapping-skipped-by-flash-attn", "stable"),
    "PK308": ("mixtral-experts-below-f32", "stable"),
    "PK309": ("continuation-mask-in-model-dtype", "stable"),
    "PK310": ("continuation-past-rotating-window", "stable"),
    "PK311": ("batch-mask-undersized", "stable"),
    "PK312": ("padding-mask-bidirectional", "stable"),
    "PK313": ("qwen3-gguf-batch", "stable"),
    "PK314": ("qwen3-gguf-continuation-on-cpu", "stable"),
    "PK315": ("gemma3-gguf-continuation-mask", "stable"),
    "PK316": ("gemma3-gguf-batch", "stable"),
    "PK317": ("rope-table-in-half-precision", "stable"),
    "PK318": ("continuation-mask-square", "stable"),
    "PK319": ("gguf-continuation-mask-square", "stable"),
    "PK320": ("phi-continuation-mask-square", "stable"),
    "PK321": ("phi-rope-table-in-f32", "stable"),
    "PK322": ("glm4-rope-first-row-only", "stable"),
    "PK323": ("glm4-gguf-batch", "stable"),
    "PK324": ("smollm3-gguf-batch", "stable"),
    "PK401": ("missing-gguf-metadata", "stable"),
    "PK402": ("gguf-freq-base-defaulted", "stable"),
    "PK403": ("rope-pairing-by-architecture", "stable"),
    "PK404": ("rope-freqs-ignored", "stable"),
    "PK405": ("context-over-max-seq-len", "stable"),
    "PK406": ("head-dim-not-embedding-over-heads", "stable"),
    "PK407": ("non-llama-architecture", "stable"),
    "PK408": ("unsupported-gguf-tensor-type", "stable"),
    "PK409": ("gguf-config-disagreement", "stable"),
    "PK410": ("qk-rows-not-permuted", "stable"),
    "PK411": ("missing-gguf-tensor", "stable"),
    "PK412": ("qwen3-gguf-rope-table-f16", "stable"),
    "PK413": ("gemma3-gguf-mlp-silu", "stable"),
    "PK414": ("gemma3-gguf-local-freq-base-key", "stable"),
    "PK415": ("phi3-gguf-freq-base-ignored", "stable"),
    "PK416": ("phi3-gguf-longrope-ignored", "stable"),
    "PK417": ("phi3-gguf-missing-output", "stable"),
    "PK418": ("qwen2-gguf-missing-qkv-bias", "stable"),
    "PK419": ("mixtral-gguf-merged-experts", "stable"),
    "PK420": ("phi3-gguf-partial-rotary", "stable"),
    "PK421": ("gemma3-gguf-sliding-window", "stable"),
    "PK422": ("phi2-gguf-split-qkv", "stable"),
    "PK423": ("phi2-gguf-rope-base-ignored", "stable"),
    "PK424": ("phi2-gguf-qkv-rows", "stable"),
    "PK425": ("glm4-gguf-rotary-dim-ignored", "stable"),
    "PK426": ("smollm3-gguf-head-dim", "stable"),
    "PK427": ("smollm3-gguf-nope-layers", "stable"),
    "PK428": ("smollm3-gguf-output-ignored", "stable"),
    "PK429": ("smollm3-gguf-requantized", "stable"),
    "PK501": ("normalizer-rebuilt-by-class", "stable"),
    "PK502": ("prefix-space-after-special-token", "stable"),
    "PK503": ("pre-tokenizer-rebuilt-by-class", "stable"),
    "PK504": ("decoder-rebuilt-by-class", "stable"),
    "PK505": ("special-token-normalized", "stable"),
    "PK506": ("padding-saved-in-tokenizer", "stable"),
    "PK507": ("tokenizer-refused-by-crate", "stable"),
    "PK508": ("eos-stop-set-beyond-tokenizer-eos", "stable"),
    "PK509": ("chat-template-writes-bos", "stable"),
    "PK510": ("generation-sampling-defaults", "stable"),
    "PK511": ("post-processor-rebuilt-by-class", "stable"),
    "PK512": ("chat-template-python-method", "stable"),
    "PK513": ("chat-template-generation-tag", "stable"),
    "PK514": ("chat-template-loop-control", "stable"),
    "PK515": ("chat-template-negative-step", "stable"),
    "PK516": ("chat-template-tojson", "stable"),
    "PK517": ("chat-template-strftime-now", "stable"),
    "PK518": ("chat-template-block-whitespace", "stable"),
    "PK519": ("special-token-decoded-normalized", "stable"),
    # PK601-PK610: the sentence-transformers pipeline (portkit.rules.embedding_pipeline); PK611+: what
    # candle's encoder modules take and read (embedding_mask, embedding_config, embedding_activation,
    # embedding_positions);
    # PK621+: a decoder's base model used as an encoder (embedding_decoder)
    "PK601": ("sentence-pipeline", "stable"),
    "PK602": ("pooling-in-program", "stable"),
    "PK603": ("normalize-in-program", "stable"),
    "PK604": ("no-normalize-in-pipeline", "stable"),
    "PK605": ("dense-after-pooling", "stable"),
    "PK606": ("prompt-prefix", "stable"),
    "PK607": ("max-seq-length-differs", "stable"),
    "PK608": ("pipeline-module-missing", "stable"),
    "PK609": ("pipeline-module-custom", "stable"),
    "PK610": ("pipeline-file-invalid", "stable"),
    "PK611": ("encoder-padding-mask", "stable"),
    "PK612": ("encoder-config-missing-field", "stable"),
    "PK613": ("nomic-bert-keys-defaulted", "stable"),
    "PK614": ("modernbert-model-prefix", "stable"),
    "PK615": ("encoder-config-value-refused", "stable"),
    "PK616": ("encoder-activation-differs", "stable"),
    "PK617": ("encoder-config-keys-disagree", "stable"),
    "PK618": ("bert-half-precision-mask-nan", "stable"),
    "PK620": ("roberta-through-bert-positions", "stable"),
    "PK621": ("decoder-embedding-left-padding", "stable"),
    "PK622": ("decoder-embedding-kv-cache-kept", "stable"),
    "PK623": ("encoder-layernorm-gamma-beta", "stable"),
}
GROUPS = {"1": "config", "2": "weights", "3": "runtime", "4": "gguf", "5": "tokenizer", "6": "embedding"}

_CLASSES: dict[str, type[Rule]] = {
    cls.code: cls
    for mod in (
        config,
        weights,
        runtime,
        runtime_paths,
        gguf,
        tokenizer,
        embedding_pipeline,
        embedding_mask,
        embedding_config,
        embedding_activation,
        embedding_positions,
        embedding_decoder,
    )
    for cls in mod.RULES
}
RULES: dict[str, Rule] = {code: _CLASSES[code]() for code in CODES if code in _CLASSES}


def families_label(rule: Rule) -> str:
    """The model families a rule speaks about, in full, as `portkit explain` and the rule pages
    list them (`portkit rules` shortens them: `portkit.rule_table.families_short`)."""
    from portkit.families import BY_NAME

    loaders = getattr(rule, "loaders", None)
    if rule.group == "tokenizer":
        return "every directory with tokenizer files, whatever the family (tokenizer-only directories too)"
    if rule.group == "embedding" and "*" in rule.families:
        return "every directory with a sentence-transformers modules.json, whatever the family"
    if loaders:  # a GGUF goes by its general.architecture, not config.json
        return "GGUF files read by " + ", ".join(loaders)
    if "*" in rule.families:
        return "every config, including model types candle 0.11.0 has no module for"
    if set(rule.families) == set(BY_NAME):
        return "every family (" + ", ".join(BY_NAME) + ")"
    return ", ".join(rule.families)


def status(code: str) -> Status:
    return CODES[code][1]


def by_code_or_name(key: str) -> Rule | None:
    key = key.strip()
    if key.upper() in RULES:
        return RULES[key.upper()]
    for r in RULES.values():
        if r.name == key:
            return r
    return None


def matches(code: str, prefixes: list[str]) -> bool:
    return any(code.startswith(p.upper()) for p in prefixes)


def is_valid_selector(sel: str) -> bool:
    s = sel.upper()
    return s == "ALL" or any(code.startswith(s) for code in CODES)


def selected(select: list[str] | None, ignore: list[str] | None, preview: bool = False) -> list[Rule]:
    """Rules to run: `select` (default: every stable rule; preview rules only when selected by
    their exact code or with `preview`) minus `ignore`. Longest matching prefix wins, as in ruff."""
    out = []
    for code, rule in RULES.items():
        st = status(code)
        if st == "removed":
            continue
        sel_len = _best(code, select) if select is not None else 0
        if select is not None and sel_len < 0:
            continue
        if st == "preview" and not preview and not (select is not None and code in [s.upper() for s in select]):
            continue
        ign_len = _best(code, ignore or [])
        if ign_len >= 0 and ign_len >= max(sel_len, 0):
            continue
        out.append(rule)
    return out


def _best(code: str, prefixes: list[str] | None) -> int:
    best = -1
    for p in prefixes or []:
        p = p.upper()
        if p == "ALL":
            best = max(best, 0)
        elif code.startswith(p):
            best = max(best, len(p))
    return best


__all__ = [
    "CODES",
    "DOC_HEADINGS",
    "GROUPS",
    "RULES",
    "Context",
    "Rule",
    "by_code_or_name",
    "families_label",
    "selected",
    "status",
]
