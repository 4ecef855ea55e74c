"""PK2xx: safetensors tensors (from headers only) vs what candle 0.11.0's `Llama::load` reads."""

from __future__ import annotations

import re
from collections import defaultdict

from portkit.rules.base import Context, Rule
from portkit.semantics import CandleView, TransformersView

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Iterable

    from portkit.findings import Finding


LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
LAYER_PARTS = (
    "input_layernorm.weight",
    "post_attention_layernorm.weight",
    "self_attn.q_proj.weight",
    "self_attn.k_proj.weight",
    "self_attn.v_proj.weight",
    "self_attn.o_proj.weight",
    "mlp.gate_proj.weight",
    "mlp.up_proj.weight",
    "mlp.down_proj.weight",
)
ATTN_BIAS = ("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias", "self_attn.o_proj.bias")
MLP_BIAS = ("mlp.gate_proj.bias", "mlp.up_proj.bias", "mlp.down_proj.bias")
KNOWN_LAYER_PARTS = set(LAYER_PARTS) | set(ATTN_BIAS) | set(MLP_BIAS) | {"self_attn.rotary_emb.inv_freq"}
TOP_LEVEL = ("model.embed_tokens.weight", "lm_head.weight", "model.norm.weight")
# candle-core-0.11.0/src/safetensors.rs:290-313
UNSUPPORTED_DTYPES = {"BOOL", "I8", "F8_E5M2", "U64", "C64"}
DUMMY_DTYPES = {"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0"}


def candle_expected(cv: CandleView) -> dict[str, tuple[int, ...]]:
    """Tensor names and shapes `Llama::load` asks the VarBuilder for, in load order
    (llama.rs:515-525, :362-371, :410-416, :452-461)."""
    h, heads, kv = cv.hidden_size or 0, cv.num_attention_heads or 0, cv.num_key_value_heads or 0
    hd = cv.head_dim or 0
    size_q, size_kv, inter, vocab = hd * heads, hd * kv, cv.intermediate_size or 0, cv.vocab_size or 0
    t: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h)}
    if not cv.tie_word_embeddings:
        t["lm_head.weight"] = (vocab, h)
    t["model.norm.weight"] = (h,)
    for i in range(cv.num_hidden_layers or 0):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = (size_q, h)
        t[p + "self_attn.k_proj.weight"] = (size_kv, h)
        t[p + "self_attn.v_proj.weight"] = (size_kv, h)
        t[p + "self_attn.o_proj.weight"] = (h, size_q)
        t[p + "mlp.gate_proj.weight"] = (inter, h)
        t[p + "mlp.up_proj.weight"] = (inter, h)
        t[p + "mlp.down_proj.weight"] = (h, inter)
        t[p + "input_layernorm.weight"] = (h,)
        t[p + "post_attention_layernorm.weight"] = (h,)
    return t


def transformers_expected(tv: TransformersView) -> dict[str, tuple[int, ...]]:
    """What `LlamaForCausalLM` loads (modeling_llama.py:205-229, :156-161, :410-421)."""
    h, heads, kv, hd = tv.hidden_size, tv.num_attention_heads, tv.num_key_value_heads, tv.head_dim
    inter, vocab = tv.intermediate_size, tv.vocab_size
    t: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, h), "model.norm.weight": (h,)}
    if not tv.tie_word_embeddings:
        t["lm_head.weight"] = (vocab, h)
    for i in range(tv.num_hidden_layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = (heads * hd, h)
        t[p + "self_attn.k_proj.weight"] = (kv * hd, h)
        t[p + "self_attn.v_proj.weight"] = (kv * hd, h)
        t[p + "self_attn.o_proj.weight"] = (h, heads * hd)
        t[p + "mlp.gate_proj.weight"] = (inter, h)
        t[p + "mlp.up_proj.weight"] = (inter, h)
        t[p + "mlp.down_proj.weight"] = (h, inter)
        t[p + "input_layernorm.weight"] = (h,)
        t[p + "post_attention_layernorm.weight"] = (h,)
        if tv.attention_bias:
            t[p + "self_attn.q_proj.bias"] = (heads * hd,)
            t[p + "self_attn.k_proj.bias"] = (kv * hd,)
            t[p + "self_attn.v_proj.bias"] = (kv * hd,)
            t[p + "self_attn.o_proj.bias"] = (h,)
        if tv.mlp_bias:
            t[p + "mlp.gate_proj.bias"] = (inter,)
            t[p + "mlp.up_proj.bias"] = (inter,)
            t[p + "mlp.down_proj.bias"] = (h,)
    return t


def is_llama_name(name: str) -> bool:
    if name in TOP_LEVEL:
        return True
    m = LAYER_RE.match(name)
    return bool(m and m.group(2) in KNOWN_LAYER_PARTS)


def weight_layers(names: Iterable[str]) -> set[int]:
    out = set()
    for n in names:
        m = LAYER_RE.match(n)
        if m:
            out.add(int(m.group(1)))
    return out


def _names(xs: list[str], k: int = 3) -> str:
    shown = ", ".join(f"`{x}`" for x in xs[:k])
    return shown + (f" and {len(xs) - k} more" if len(xs) > k else "")


def _pattern(name: str) -> str:
    return LAYER_RE.sub(lambda m: f"model.layers.N.{m.group(2)}", name)


def _weights_file(ctx: Context) -> str:
    st = ctx.facts.safetensors
    assert st is not None
    return str(st.index.path if st.index is not None else st.files[0].path)


class _WeightsRule(Rule):
    group = "weights"
    needs = ("config", "safetensors")

    def ready(self, ctx: Context) -> bool:
        return bool(ctx.facts.safetensors and ctx.tv and ctx.cv and ctx.cv.ok and ctx.tv.ok)


class MissingTensor(_WeightsRule):
    """A tensor candle's `Llama::load` reads is not in the safetensors files.

    ## What it does
    Lists the tensors candle 0.11.0 asks for (embeddings, final norm, and every tensor of
    the layers the weights do have) that no safetensors file holds. Whole missing layers are
    PK204; a missing `lm_head.weight` is PK205.

    ## Why is this bad?
    A missing embedding or norm fails at load (`cannot find tensor model.norm.weight`). A
    missing tensor inside a layer is worse: `Llama::load` calls `.unwrap()` per block, so
    candle panics (exit 101) instead of returning an error.

    ## Example
    `model.layers.1.mlp.up_proj.weight` absent from `model.safetensors`.

    ## Fix
    None in config.json; re-export the weights.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:515-525 (`Block::load(...).unwrap()` at
    :524); candle-core-0.11.0/src/safetensors.rs:507-523 (`cannot find tensor`).

    ## Verification
    crash: candle must fail (or panic) naming the first missing tensor.

    ## References
    FIELD-REPORTS mode 15: candle#1632, #3448, #3457, cake#34, llama.cpp#9211.
    """

    code = "PK201"
    name = "missing-tensor"
    severity = "error"
    effect = "load-error"
    fix_title = "Re-export the weights with every tensor candle reads"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not self.ready(ctx):
            return
        have = ctx.facts.safetensors.tensors  # type: ignore[union-attr]
        present_layers = weight_layers(have)
        missing_top = [n for n in ("model.embed_tokens.weight", "model.norm.weight") if n not in have]
        missing_layer = []
        for n in candle_expected(ctx.cv):  # type: ignore[arg-type]
            m = LAYER_RE.match(n)
            if m and int(m.group(1)) in present_layers and n not in have:
                missing_layer.append(n)
        if missing_top:
            yield self.finding(
                ctx,
                f"candle 0.11.0 fails at load: the weights have no {_names(missing_top)}; transformers would "
                "initialise them randomly",
                filename=_weights_file(ctx),
                location=None,
                transformers_value="random init",
                candle_value=f"cannot find tensor {missing_top[0]}",
                expect=f"cannot find tensor {missing_top[0]}",
            )
        if missing_layer:
            yield self.finding(
                ctx,
                f"candle 0.11.0 panics in `Llama::load` (`.unwrap()` per block): the weights have no "
                f"{_names(missing_layer)}; transformers would initialise them randomly",
                filename=_weights_file(ctx),
                location=None,
                transformers_value="random init",
                candle_value=f"panic: cannot find tensor {missing_layer[0]}",
                expect=f"cannot find tensor {missing_layer[0]}",
            )


class UnreadTensor(_WeightsRule):
    """Tensors in the checkpoint that candle 0.11.0 never reads.

    ## What it does
    Lists Llama-named tensors candle's `Llama::load` never asks for: q/k/v/o and MLP biases,
    layers past `num_hidden_layers`, `lm_head.weight` when embeddings are tied, stored rotary
    `inv_freq` buffers. Each group says whether transformers reads it.

    ## Why is this bad?
    When transformers reads them (biases with `attention_bias`/`mlp_bias` true) candle
    computes another model without an error. When neither reads them, the config and the
    weights disagree about the model (bias tensors with `attention_bias: false`, a distinct
    `lm_head` with tied embeddings), which is worth knowing before trusting either.

    ## Example
    `model.layers.0.self_attn.q_proj.bias` present with `attention_bias: true`.

    ## Fix
    None in config.json.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:7 (`linear_no_bias`), :517-521 (tied
    `lm_head` reuses the embedding), :523 (layers `0..num_hidden_layers` only).

    ## Verification
    static-only (the numeric effect of biases is PK105/PK106's probe).

    ## References
    FIELD-REPORTS modes 5 and 6: mlc-llm#3494 (240 of 420 bias vectors dropped),
    ANEForge#253, mlx-examples#1324, vllm#6758.
    """

    code = "PK202"
    name = "unread-tensor"
    severity = "warning"
    effect = "silent"
    fix_title = "Make config.json and the weights describe the same model"
    probe_kind = "static-only"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not self.ready(ctx):
            return
        have = ctx.facts.safetensors.tensors  # type: ignore[union-attr]
        cand = candle_expected(ctx.cv)  # type: ignore[arg-type]
        tf = transformers_expected(ctx.tv)  # type: ignore[arg-type]
        groups: dict[str, list[str]] = defaultdict(list)
        for n in have:
            if n in cand or not is_llama_name(n):
                continue
            m = LAYER_RE.match(n)
            part = m.group(2) if m else n
            if m and int(m.group(1)) >= (ctx.cv.num_hidden_layers or 0):  # type: ignore[union-attr]
                groups["extra-layer"].append(n)
            elif part in ATTN_BIAS or part in MLP_BIAS:
                groups["bias-read" if n in tf else "bias-unread"].append(n)
            elif n == "lm_head.weight":
                groups["tied-lm-head"].append(n)
            else:
                groups["other"].append(n)
        texts = {
            "bias-read": ("transformers adds them (`attention_bias`/`mlp_bias` is true)", "error"),
            "bias-unread": ("transformers ignores them too (`attention_bias`/`mlp_bias` is false): the config may be wrong", "warning"),
            "extra-layer": (f"they are past `num_hidden_layers`={ctx.cv.num_hidden_layers}; transformers ignores them too", "warning"),  # type: ignore[union-attr]
            "tied-lm-head": ("`tie_word_embeddings` is true, so both use the embedding matrix instead", "warning"),
            "other": ("transformers does not load them either", "warning"),
        }
        for key, names in groups.items():
            why, sev = texts[key]
            yield self.finding(
                ctx,
                f"candle 0.11.0 never reads {len(names)} tensor{'s' if len(names) > 1 else ''} ({_names(names)}); {why}",
                filename=_weights_file(ctx),
                location=None,
                severity=sev,  # type: ignore[arg-type]
                transformers_value="read" if key == "bias-read" else "unread",
                candle_value="unread",
            )


class UnexpectedTensor(_WeightsRule):
    """Tensor names outside the Llama naming scheme candle looks up.

    ## What it does
    Lists tensors whose names are not `model.embed_tokens.weight`, `model.norm.weight`,
    `lm_head.weight` or `model.layers.N.<llama part>`, and names a common prefix when
    stripping it would give Llama names (`language_model.`).

    ## Why is this bad?
    candle reads tensors by exact name: a prefixed checkpoint (a multimodal wrapper, a
    merged adapter) or quantized tensors (`qweight`, `scales`) load as missing tensors or are
    silently skipped.

    ## Example
    `language_model.model.layers.0.self_attn.q_proj.weight`.

    ## Fix
    None in config.json; rename the tensors (strip the prefix) or dequantize.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:516-524 (`vb.pp("model.embed_tokens")`,
    `model.layers.{i}`, `lm_head`).

    ## Verification
    static-only.

    ## References
    FIELD-REPORTS mode 15: candle#1632 (no `model.` prefix), cake#34 (doubled prefix),
    llama.cpp#8134 (`qweight`).
    """

    code = "PK203"
    name = "unexpected-tensor"
    severity = "warning"
    effect = "load-error"
    fix_title = "Rename the tensors to the Llama scheme (strip the prefix) or dequantize them"
    probe_kind = "static-only"

    def check(self, ctx: Context) -> Iterable[Finding]:
        st = ctx.facts.safetensors
        if st is None:
            return
        odd = [n for n in st.tensors if not is_llama_name(n)]
        if not odd:
            return
        hint = ""
        for n in odd:
            i = n.find("model.")
            if i > 0 and is_llama_name(n[i:]):
                hint = f"; stripping the prefix `{n[:i]}` gives Llama names"
                break
            if n.endswith(("qweight", "qzeros", "scales", "g_idx")):
                hint = "; these look like GPTQ/AWQ quantized tensors, which candle's llama does not read"
                break
        yield self.finding(
            ctx,
            f"{len(odd)} tensor name{'s are' if len(odd) > 1 else ' is'} not one candle 0.11.0's llama looks up "
            f"({_names(odd)}){hint}",
            filename=_weights_file(ctx),
            location=None,
        )


class LayerCountMismatch(_WeightsRule):
    """The weights hold a different number of layers than `num_hidden_layers`.

    ## What it does
    Compares the layer indices present in the weights with `num_hidden_layers`.

    ## Why is this bad?
    Fewer layers than the config: candle's `Llama::load` calls `.unwrap()` on each block, so
    it panics (exit 101, no `Err` to handle) at the first missing layer; transformers
    initialises the missing layers randomly and runs. More layers: both silently use only
    the first `num_hidden_layers`.

    ## Example
    `num_hidden_layers: 32` with `model.layers.0` to `model.layers.27` in the weights.

    ## Fix
    None automatically: set `num_hidden_layers` to the checkpoint's layer count only if the
    checkpoint is complete.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:523-525
    (`.map(|i| Block::load(vb.pp(format!("model.layers.{i}")), cfg).unwrap())`).

    ## Verification
    crash: candle must panic (caught by the runner) naming the first missing layer tensor.

    ## References
    CANDLE-FACTS "layers" (seed 001); FIELD-REPORTS mode 15.
    """

    code = "PK204"
    name = "layer-count-mismatch"
    severity = "error"
    effect = "panic"
    fix_title = "Make `num_hidden_layers` match the layers in the checkpoint"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not self.ready(ctx):
            return
        layers = weight_layers(ctx.facts.safetensors.tensors)  # type: ignore[union-attr]
        n = ctx.cv.num_hidden_layers or 0  # type: ignore[union-attr]
        count = max(layers) + 1 if layers else 0
        missing = sorted(set(range(n)) - layers)
        if missing:
            yield self.finding(
                ctx,
                f"`num_hidden_layers` is {n} but the weights have {len(layers)} layer{'s' if len(layers) != 1 else ''}: "
                f"candle 0.11.0 panics loading `model.layers.{missing[0]}` (`.unwrap()` in `Llama::load`); "
                "transformers initialises the missing layers randomly",
                keys=("num_hidden_layers",),
                transformers_value=f"{len(missing)} random layers",
                candle_value="panic",
                expect=f"model.layers.{missing[0]}",
            )
        elif count > n:
            yield self.finding(
                ctx,
                f"`num_hidden_layers` is {n} but the weights have {count} layers: transformers and candle 0.11.0 "
                f"both run only the first {n}",
                keys=("num_hidden_layers",),
                severity="warning",
                transformers_value=n,
                candle_value=n,
                probe_kind="static-only",  # both sides run the same layers: nothing to crash or measure
            )


class LmHeadVsTie(_WeightsRule):
    """Untied embeddings in the config, and no `lm_head.weight` in the checkpoint.

    ## What it does
    Flags `tie_word_embeddings` false or absent (candle's default is false) when the
    weights have no `lm_head.weight`.

    ## Why is this bad?
    candle fails at load (`cannot find tensor lm_head.weight`). transformers runs with a
    randomly initialised `lm_head`, so its logits are garbage too (transformers#43429).
    Llama 3.2 1B/3B tie their embeddings; a config that lost `tie_word_embeddings: true`
    breaks both.

    ## Example
    config.json without `tie_word_embeddings`, weights without `lm_head.weight`.

    ## Fix
    None automatically: set `tie_word_embeddings: true` if the model ties its embeddings,
    else restore `lm_head.weight`.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:82 (`unwrap_or(false)`), :517-521.

    ## Verification
    crash: candle must fail with `cannot find tensor lm_head.weight`.

    ## References
    FIELD-REPORTS mode 5: candle#2516, #2443, RuVector#645, #646, cake#38, TGI#2918,
    transformers#43429.
    """

    code = "PK205"
    name = "lm-head-vs-tie"
    severity = "error"
    effect = "load-error"
    fix_title = "Set `tie_word_embeddings: true` if the model ties its embeddings, else restore `lm_head.weight`"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not self.ready(ctx):
            return
        if ctx.cv.tie_word_embeddings or "lm_head.weight" in ctx.facts.safetensors.tensors:  # type: ignore[union-attr]
            return
        written = "is false" if ctx.has_key("tie_word_embeddings") else "is absent (false in both)"
        yield self.finding(
            ctx,
            f"`tie_word_embeddings` {written} and the weights have no `lm_head.weight`: candle 0.11.0 fails at load "
            "with `cannot find tensor lm_head.weight`; transformers initialises `lm_head` randomly",
            keys=("tie_word_embeddings",),
            transformers_value="random lm_head",
            candle_value="cannot find tensor lm_head.weight",
            expect="cannot find tensor lm_head.weight",
        )


class TensorShapeMismatch(_WeightsRule):
    """A tensor's shape is not the one candle 0.11.0 derives from config.json.

    ## What it does
    Compares every tensor candle reads with the shape candle computes from the config
    (`(hidden/heads) * kv_heads` rows for k/v, and so on), and says whether transformers'
    expected shape matches the file.

    ## Why is this bad?
    candle's VarBuilder refuses the tensor (`shape mismatch for ...`): an error for the
    embeddings, norm and `lm_head`, a panic inside `Llama::load`'s per-block `.unwrap()` for
    layer tensors. When
    transformers expects the file's shape (a `head_dim` key, GQA heads), the checkpoint is
    fine and candle's reading of the config is the problem; when neither does, the config
    and the weights disagree.

    ## Example
    `num_key_value_heads` absent (candle: 32 kv heads) with `k_proj` of 1024 rows (8 heads).

    ## Fix
    None automatically.

    ## Candle source
    candle-nn-0.11.0/src/var_builder.rs:501-520 (`shape mismatch for {name}`);
    candle-transformers-0.11.0/src/models/llama.rs:362-371, :410-416, :516-522.

    ## Verification
    crash: candle must fail with `shape mismatch for` the first mismatching tensor.

    ## References
    FIELD-REPORTS modes 4 and 18: candle#3917, meta-llama/llama#427, llama.cpp#2376.
    """

    code = "PK206"
    name = "tensor-shape-mismatch"
    severity = "error"
    effect = "panic"
    fix_title = "Make config.json describe the checkpoint's shapes"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not self.ready(ctx):
            return
        have = ctx.facts.safetensors.tensors  # type: ignore[union-attr]
        tf = transformers_expected(ctx.tv)  # type: ignore[arg-type]
        groups: dict[tuple[str, tuple[int, ...], tuple[int, ...]], list[str]] = defaultdict(list)
        first: str | None = None  # candle stops at the first mismatch in load order
        for n, shape in candle_expected(ctx.cv).items():  # type: ignore[arg-type]
            t = have.get(n)
            if t is not None and t.shape != shape:
                groups[(_pattern(n), shape, t.shape)].append(n)
                first = first or n
        for (pat, want, got), names in groups.items():
            tf_ok = all(tf.get(n) == got for n in names)
            side = "transformers expects the file's shape" if tf_ok else "transformers does not expect it either"
            where = f" in {len(names)} layers" if len(names) > 1 else ""
            how = "panics in `Llama::load` (`.unwrap()` per block)" if LAYER_RE.match(names[0]) else "fails at load"
            yield self.finding(
                ctx,
                f"`{pat}` is {list(got)}{where}; candle 0.11.0 expects {list(want)} from config.json and {how}; {side}",
                filename=str(have[names[0]].file),
                location=None,
                transformers_value=list(tf.get(names[0], ())) or None,
                candle_value=list(want),
                expect=f"shape mismatch for {first}",
            )


class UnsupportedTensorDtype(_WeightsRule):
    """A safetensors dtype candle 0.11.0 cannot load into a model.

    ## What it does
    Flags tensors stored as BOOL, I8, F8_E5M2, U64 or C64 (candle refuses them) or as the
    MX placeholder types F4, F6_E2M3, F6_E3M2, F8_E8M0 (loaded as opaque data that cannot be
    converted to the model dtype).

    ## Why is this bad?
    Loading fails with `unsupported safetensor dtype ...` (or a conversion error).

    ## Example
    An F8_E5M2 checkpoint.

    ## Fix
    None in config.json; convert the weights to F32/F16/BF16.

    ## Candle source
    candle-core-0.11.0/src/safetensors.rs:290-313 (`convert`), candle-core-0.11.0/src/error.rs:207.

    ## Verification
    crash: candle must fail with `unsupported safetensor dtype`.

    ## References
    candle#594, candle#3503 (dtype support on CPU).
    """

    code = "PK207"
    name = "unsupported-tensor-dtype"
    severity = "error"
    effect = "load-error"
    fix_title = "Convert the weights to F32, F16 or BF16"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        st = ctx.facts.safetensors
        if st is None:
            return
        bad: dict[str, list[str]] = defaultdict(list)
        for n, t in st.tensors.items():
            if t.dtype in UNSUPPORTED_DTYPES or t.dtype in DUMMY_DTYPES:
                bad[t.dtype].append(n)
        for dt, names in bad.items():
            how = f"`unsupported safetensor dtype {dt}`" if dt in UNSUPPORTED_DTYPES else "an opaque MX type it cannot convert"
            yield self.finding(
                ctx,
                f"{len(names)} tensor{'s are' if len(names) > 1 else ' is'} {dt} ({_names(names)}); candle 0.11.0 fails "
                f"at load with {how}",
                filename=str(st.tensors[names[0]].file),
                location=None,
                candle_value=f"unsupported safetensor dtype {dt}",
                expect="unsupported safetensor dtype" if dt in UNSUPPORTED_DTYPES else None,
            )


RULES = (
    MissingTensor,
    UnreadTensor,
    UnexpectedTensor,
    LayerCountMismatch,
    LmHeadVsTie,
    TensorShapeMismatch,
    UnsupportedTensorDtype,
)
