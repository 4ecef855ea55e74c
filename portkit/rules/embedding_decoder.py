"""PK621, PK622: a decoder's base model used as an encoder (Qwen3-Embedding), through candle.

A sentence-transformers directory whose config is a Qwen3 decoder's (Qwen3ForCausalLM weights,
last-token pooling) is an embedding model, and a candle program embeds with
`candle_transformers::models::qwen3::Model`, the decoder without its head. That module was
written for generation: its forward takes no padding mask, and it keeps a KV cache between
calls. Both are silent in an embedding program.
"""

from __future__ import annotations

from portkit.encoders import detect_decoder_embedder
from portkit.rules.base import Context, Rule, location

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, ClassVar

    from portkit.encoders import Encoder
    from portkit.findings import Finding, Severity


class DecoderEmbedderRule(Rule):
    """What both rules share: the decoder module a sentence-transformers directory pools."""

    group = "embedding"
    families: ClassVar[tuple[str, ...]] = ("*",)
    needs: ClassVar[tuple[str, ...]] = ("config",)
    probe_run = "embedding"
    severity: ClassVar[Severity] = "warning"
    effect = "silent"
    probe_kind = "numeric"

    def embedder(self, ctx: Context) -> tuple[Any, Encoder | None]:
        doc = ctx.facts.config
        if doc is None or getattr(ctx.facts, "sentence_pipeline", None) is None:
            return doc, None
        return doc, detect_decoder_embedder(doc.value, True)


class DecoderEmbeddingLeftPadding(DecoderEmbedderRule):
    """A decoder used as an encoder whose tokenizer pads on the left: candle's forward takes no mask.

    ## What it does
    Flags a sentence-transformers directory whose config is a Qwen3 decoder's when
    tokenizer_config.json says `"padding_side": "left"`, as Qwen3-Embedding's does.

    ## Why is this bad?
    `qwen3::Model::forward(input, offset)` takes no padding mask and attends causally
    (qwen3.rs:468-489; the CPU path masks causally at qwen3.rs:290-295). sentence-transformers pads a
    batch on the left and passes the mask, so each row's last column is its last token. A candle
    program that pads the same way has every token attend to the pads before it, and reads the
    rotary positions counted from the first pad: every padded row's vector changes, while a text
    embedded alone agrees.

    ## Example
    `model.forward(&Tensor::new(left_padded_ids, &device)?, 0)` on the tokenizer's padded batch.

    ## Fix
    Pad on the right and pool each row at its own last token (causal attention never looks at the
    pads after it), or embed one text at a time.

    ## Candle source
    candle-transformers-0.11.0/src/models/qwen3.rs:468-489 (`Model::forward`), :273-320 (the
    CPU attention, causal with the offset only).

    ## Verification
    numeric: portkit verify's embedding run feeds candle the batch as the tokenizer pads it (the
    counterfactual program) and the same texts padded on the right, pooled at each row's last
    token (the correct program), both against sentence-transformers; CONFIRMED when only the
    first is out of its floor (docs/embeddings.md).

    ## References
    - https://github.com/huggingface/candle/blob/0.11.0/candle-transformers/src/models/qwen3.rs#L468-L489
    - https://github.com/huggingface/text-embeddings-inference/pull/646
    """

    code = "PK621"
    name = "decoder-embedding-left-padding"
    needs = ("config", "tokenizer")
    fix_title = "Pad on the right and pool each row's last token"

    def check(self, ctx: Context) -> Iterable[Finding]:
        _, enc = self.embedder(ctx)
        tok = ctx.facts.tokenizer
        if enc is None or tok is None or tok.config is None or tok.config_value.get("padding_side") != "left":
            return
        msg = (
            f"{enc.who} takes no padding mask and attends causally ({enc.mask_source}); "
            "tokenizer_config.json pads on the left, so a program that batches as the tokenizer pads has every row "
            "attend "
            "to its pads, its positions counted from the first pad: pad on the right and pool each row at its own last "
            "token, or embed one text at a time"
        )
        from portkit.findings import CandleProgram  # with the first finding (`portkit.rules.base.location`)

        yield self.finding(
            ctx,
            msg,
            filename=tok.config.path,
            location=location(tok.config.position("padding_side")),
            transformers_value="left, with the attention mask",
            candle_value="no mask",
            probe=self.probe_of(CandleProgram, program="tokenizer-padded-batch"),
        )


class DecoderEmbeddingKvCacheKept(DecoderEmbedderRule):
    """candle's `qwen3::Model` keeps its KV cache between forwards and cannot reset it.

    ## What it does
    Flags every sentence-transformers directory whose config is that of a decoder whose candle
    base model keeps a KV cache it cannot reset (`Encoder.kept_cache`): Qwen3 (Qwen3-Embedding).

    ## Why is this bad?
    `qwen3::Model::forward` appends each call's keys and values to the layer's `ConcatKvCache`
    (qwen3.rs:223), and `Model::clear_kv_cache` is private (qwen3.rs:435;
    huggingface/candle#3381 and #3384 ask to make it public). An embedding program loads the
    model once and calls `forward(&ids, 0)` for text after text: from the second text on, every
    token also attends to the earlier texts' keys, and a batch of another size fails on the
    cache's shape. The first text agrees, so a one-text check passes.

    ## Example
    `let mut model = qwen3::Model::new(&cfg, vb)?; for ids in texts { model.forward(&ids, 0)?; }`

    ## Fix
    Build a fresh `qwen3::Model::new(&cfg, vb.clone())` for each forward (the VarBuilder's
    tensors are loaded once and shared), or use `ModelForCausalLM`, whose `clear_kv_cache` is
    public, only where logits are wanted.

    ## Candle source
    candle-transformers-0.11.0/src/models/qwen3.rs:223 (`self.kv_cache.append`), :435
    (`fn clear_kv_cache`, private), :516 (`ModelForCausalLM::clear_kv_cache`, public).

    ## Verification
    numeric: portkit verify's embedding run embeds its corpus one text after another through one
    `qwen3::Model` (the counterfactual program) and each text through a fresh one (the correct
    program), both against sentence-transformers; CONFIRMED when only the first is out of its
    floor (docs/embeddings.md).

    ## References
    - https://github.com/huggingface/candle/pull/3384
    - https://github.com/huggingface/candle/blob/0.11.0/candle-transformers/src/models/qwen3.rs#L223
    """

    code = "PK622"
    name = "decoder-embedding-kv-cache-kept"
    fix_title = "Build a fresh model for each forward"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = self.embedder(ctx)
        if enc is None or not enc.kept_cache:
            return
        msg = (
            f"{enc.who} `{enc.model}` keeps its KV cache across forwards ({enc.kept_cache}; "
            "https://github.com/huggingface/candle/pull/3384): a program that loads it once and embeds text after "
            "text has "
            f"every later text attend to the earlier ones; build a fresh `{enc.name}::{enc.model}` for each forward"
        )
        from portkit.findings import CandleProgram  # with the first finding (`portkit.rules.base.location`)

        yield self.finding(
            ctx,
            msg,
            keys=("model_type",) if isinstance(doc.value.get("model_type"), str) else (),
            candle_value="cache kept across forwards",
            transformers_value="each encode a forward of its own",
            probe=self.probe_of(CandleProgram, program="one-model"),
        )


RULES = (DecoderEmbeddingLeftPadding, DecoderEmbeddingKvCacheKept)
