"""PK4xx only candle 0.11.0's `quantized_gemma3` loader has."""

from __future__ import annotations

from portkit.rules import as_candle
from portkit.rules.base import Context, f32
from portkit.rules.gguf.base import GgufRule
from portkit.semantics.gguf import GEMMA3_DEFAULT_LOCAL_FREQ_BASE, md_f32, md_u32, metadata_prefix

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class Gemma3GgufMlpSilu(GgufRule):
    """quantized_gemma3's MLP uses SiLU; Gemma 3 uses the tanh GELU.

    ## What it does
    Flags every GGUF read by candle 0.11.0's quantized_gemma3 (architectures `gemma3`, and any
    file whose metadata it reads under `gemma3.`, `gemma2.`, `gemma.` or `gemma-embedding.`),
    unless the config.json beside it sets `hidden_activation` to `silu` (transformers then
    computes what candle does).

    ## Why is this bad?
    The gated MLP computes `silu(gate) * up` where transformers' Gemma 3 computes
    `gelu_pytorch_tanh(gate) * up` (`hidden_activation`): every layer is another function, so
    the logits are wrong from the first token (docs/measurements.md, "Rule effects").
    transformers run with `hidden_activation="silu"` matches candle within 1e-4
    (tests/native/test_gguf_loaders.py). No metadata key selects the activation.

    ## Example
    Any `general.architecture = "gemma3"` GGUF run with `quantized_gemma3::ModelWeights`.

    ## Fix
    None in the file; run the safetensors checkpoint with candle's `gemma3` module.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_gemma3.rs:57-63 (`candle_nn::ops::silu`
    at :60).

    ## Verification
    numeric, transformers as candle computes: no metadata edit changes the activation, so
    verify runs transformers with `hidden_activation="silu"`; CONFIRMED when the GGUF agrees
    with it where it does not agree with transformers as written (docs/verify.md).

    ## References
    - transformers `models/gemma3/modeling_gemma3.py` (`Gemma3MLP`: `ACT2FN[config.hidden_activation]`)
    - tests/native/test_gguf_loaders.py `test_gemma3_gguf_is_transformers_with_silu`
    """

    code = "PK413"
    name = "gemma3-gguf-mlp-silu"
    severity = "error"
    effect = "silent"
    fix_title = "Run the safetensors checkpoint with candle's `gemma3` module instead"
    probe_kind = "numeric"
    loaders = ("quantized_gemma3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        cfg = as_candle.raw_config(ctx)
        # transformers' Gemma3TextConfig default (configuration_gemma3.py)
        act = cfg.get("hidden_activation", "gelu_pytorch_tanh") if cfg is not None else "gelu_pytorch_tanh"
        if act in ("silu", "swish"):
            return  # the model's own activation: candle's SiLU is right
        for g, _v in self.each(ctx):
            yield self.file_finding(
                ctx,
                g,
                f"candle {ctx.target.candle}'s quantized_gemma3 gates its MLP with SiLU; Gemma 3 (transformers' "
                "`hidden_activation`) "
                f"uses {'the tanh GELU' if act == 'gelu_pytorch_tanh' else f'`{act}`'}: every layer computes another "
                "function",
                transformers_value=act,
                candle_value="silu",
                as_candle=as_candle.edit("SiLU in the MLP", config={"hidden_activation": "silu"}),
            )


class Gemma3GgufLocalFreqBaseKey(GgufRule):
    """The sliding layers' RoPE base is in `rope.freq_base_swa`; quantized_gemma3 reads `rope.local_freq_base`.

    ## What it does
    Flags a GGUF read by quantized_gemma3 that writes the sliding-window layers' base as
    llama.cpp does (`{arch}.rope.freq_base_swa`), with no `{arch}.rope.local_freq_base`, when
    that base is not candle's default 10000.

    ## Why is this bad?
    candle looks only for `rope.local_freq_base` and falls back to 10000 for the local layers.
    Gemma 3's own value is 10000, so published Gemma 3 files are fine by luck; any other base
    (a fine-tune, another gemma-architecture model) rotates every sliding layer with the
    wrong frequencies, silently.

    ## Example
    `gemma3.rope.freq_base_swa = 50000.0`, no `gemma3.rope.local_freq_base`.

    Use instead: also write `gemma3.rope.local_freq_base = 50000.0`.

    ## Fix
    None in config.json; copy the value into `{arch}.rope.local_freq_base` (F32).

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_gemma3.rs:302-304
    (`md_get("rope.local_freq_base")...unwrap_or(DEFAULT_ROPE_FREQUENCY_SLIDING)`), :27 (10000).

    ## Verification
    numeric: candle's logits differ and agree once `rope.local_freq_base` is written.

    ## References
    - llama.cpp `convert_hf_to_gguf.py` (Gemma 3 writes `rope.freq_base_swa`)
    - tests/native/test_gguf_loaders.py `test_silent_rule_mechanism_in_candle[PK414]`
    """

    code = "PK414"
    name = "gemma3-gguf-local-freq-base-key"
    severity = "error"
    effect = "silent"
    fix_title = "Write the sliding layers' base as `rope.local_freq_base` (F32)"
    probe_kind = "numeric"
    loaders = ("quantized_gemma3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            p = metadata_prefix(g, "quantized_gemma3", ctx.target.candle)
            local_key = f"{p}.rope.local_freq_base"
            if md_f32(g, local_key) is not None:
                continue
            swa = md_f32(g, f"{p}.rope.freq_base_swa")
            if swa is None or f32(swa) == GEMMA3_DEFAULT_LOCAL_FREQ_BASE:
                continue
            yield self.file_finding(
                ctx,
                g,
                f"`{p}.rope.freq_base_swa` is {swa:.7g} but candle {ctx.target.candle}'s quantized_gemma3 reads only "
                f"`{local_key}`: its sliding-window layers use 10000",
                transformers_value=swa,
                candle_value=GEMMA3_DEFAULT_LOCAL_FREQ_BASE,
                probe_patch={local_key: swa},
            )


class Gemma3GgufSlidingWindow(GgufRule):
    """quantized_gemma3's sliding window keeps one key too many in prefill and none in decode.

    ## What it does
    Flags a GGUF read by quantized_gemma3 with sliding-window layers (every layer that is not
    a multiple of `attention.sliding_window_type`, default 6): its `attention.sliding_window`
    W is applied as transformers never does. An error when the target's `--max-tokens`
    reaches W + 1, else a warning.

    ## Why is this bad?
    transformers keeps the last W keys on a sliding layer. candle's prefill mask keeps W + 1
    (`j + W < i` masks), and a decode step (one token) gets no mask at all while the KV cache is
    never trimmed: from W + 1 tokens on, every sliding layer attends to keys transformers has
    dropped, silently (tests/native/test_gguf_loaders.py measures both on a generated gemma3 GGUF).

    ## Example
    `gemma3.attention.sliding_window = 512` (Gemma 3 1B) and a 2,000-token chat.

    ## Fix
    None that makes decode agree. `attention.sliding_window` = W - 1 makes candle's prefill keep
    the W keys transformers keeps.

    ## Candle source
    candle-transformers-0.11.0/src/models/quantized_gemma3.rs:152-168 (the mask), :447-451 (no
    mask when seq_len == 1), :210-222 (the cache only grows), :386-387 (which layers slide).

    ## Verification
    numeric: with `attention.sliding_window` one less, candle's prefill agrees with transformers
    (decode still differs past the window).

    ## References
    - transformers `masking_utils.py:96-97` (a window of W keeps the last W keys)
    - tests/native/test_gguf_loaders.py `test_gemma3_gguf_window_is_one_wider_in_prefill_and_absent_in_decode`
    """

    code = "PK421"
    name = "gemma3-gguf-sliding-window"
    severity = "warning"
    effect = "silent"
    fix_title = "Keep prompt and generation within the sliding window, or run candle's safetensors `gemma3` module"
    probe_kind = "numeric"
    loaders = ("quantized_gemma3",)

    def check(self, ctx: Context) -> Iterable[Finding]:
        for g, _v in self.each(ctx):
            p = metadata_prefix(g, "quantized_gemma3", ctx.target.candle)
            window, blocks = md_u32(g, f"{p}.attention.sliding_window"), md_u32(g, f"{p}.block_count")
            pattern = md_u32(g, f"{p}.attention.sliding_window_type") or 6  # quantized_gemma3.rs:294-296
            if window is None or not blocks:
                continue
            sliding = sum(1 for i in range(min(blocks, 100_000)) if (i + 1) % pattern > 0)
            if not sliding:
                continue
            max_tokens = ctx.target.max_tokens
            severe = max_tokens is not None and max_tokens > window
            plan = f"; you plan {max_tokens} tokens" if max_tokens is not None else ""
            yield self.file_finding(
                ctx,
                g,
                f"transformers keeps the last {window} keys on {sliding} of {blocks} layers; candle "
                f"{ctx.target.candle}'s quantized_gemma3 "
                f"keeps {window + 1} in prefill and every key in decode: they differ from {window + 1} tokens on{plan}",
                severity="error" if severe else "warning",
                transformers_value=window,
                candle_value={"prefill": window + 1, "decode": None},
                probe_patch={f"{p}.attention.sliding_window": window - 1} if window > 0 else None,
            )
