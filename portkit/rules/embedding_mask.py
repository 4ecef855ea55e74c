"""PK611: the padding mask a candle program must pass an encoder module's forward; PK618: the
mask bert.rs builds in half precision.

Each of candle 0.11.0's encoder modules takes the mask its own way (`portkit.encoders.Encoder.mask`):
bert.rs and nomic_bert.rs take an `Option` and attend to every position without one; distilbert.rs
masks where the mask is 1, the inverse of transformers' `attention_mask`; jina_bert.rs takes none.
A program that embeds one text at a time never sees the difference; one padded batch does.
"""

from __future__ import annotations

from portkit.rules.base import Context
from portkit.rules.encoder_rule import EncoderRule, encoder_config

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding

#: what the program must pass, by the module's mask convention
_MUST = {
    "attend": "pass the tokenizer's attention mask (1 on a token, 0 on a pad) to every forward of a padded batch",
    "masked": "pass the inverse of the tokenizer's attention mask (1 on a pad), as distilbert.rs masks where the mask "
    "is 1",
}
_WITHOUT = {
    "bert": "with `None` every position attends to the pads of a padded batch "
    "(https://github.com/huggingface/candle/issues/1798)",
    "nomic_bert": "with `None` every position attends to the pads of a padded batch",
    "distilbert": "transformers' own mask passed as is masks the tokens and attends to the pads "
    "(https://github.com/huggingface/candle/issues/2721)",
    "xlm_roberta": "a mask of ones, as a program without one builds it, attends to the pads",
    "modernbert": "a mask of ones, as a program without one builds it, attends to the pads",
}


class EncoderPaddingMask(EncoderRule):
    """The padding mask the program must pass candle's encoder module in a padded batch.

    ## What it does
    Flags every checkpoint whose config loads into one of candle 0.11.0's encoder modules
    (`portkit.encoders`) and says what that module's forward takes as its padding mask and what
    the program must pass.

    ## Why is this bad?
    Rows of a padded batch attend to their pads when the mask is missing, of ones, or of the
    wrong convention; their vectors change while a text embedded alone agrees, so the bug shows
    only in the batched path of a search index (huggingface/candle#1798, #1552; distilbert:
    #2721, #2667).

    ## Example
    `BertModel::forward(&ids, &type_ids, None)` on a batch padded to its longest row.

    ## Fix
    Pass the tokenizer's attention mask as the message says (distilbert: its inverse); with
    jina_bert, whose forward takes no mask, embed texts of one length together or one at a time.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-528, distilbert.rs:183-186,
    xlm_roberta.rs:373-390, modernbert.rs:390-393, jina_bert.rs:400, nomic_bert.rs:442-462.

    ## Verification
    numeric: portkit verify's embedding run feeds one padded batch of its corpus to candle with
    the mask the message asks for and without it (the counterfactual program), both against
    sentence-transformers; CONFIRMED when only the run without is out of its floor, with the
    worst cosine it costs (docs/embeddings.md).

    ## References
    - https://github.com/huggingface/candle/issues/1798
    - https://github.com/huggingface/candle/issues/1552
    - https://github.com/huggingface/candle/issues/2721
    - https://github.com/huggingface/candle/pull/2878
    """

    code = "PK611"
    name = "encoder-padding-mask"
    severity = "warning"
    effect = "silent"
    fix_title = "Pass the padding mask as the encoder module takes it"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = encoder_config(ctx)
        if enc is None:
            return
        if enc.mask is None:
            msg = (
                f"{enc.who}'s forward takes no padding mask ({enc.mask_source}): the rows of a padded batch attend "
                "to their pads; embed texts of one length together, or one at a time"
            )
        else:
            msg = (
                f"{enc.who} takes the padding mask as {enc.mask_source}: the program must {_MUST[enc.mask]}; "
                f"{_WITHOUT[enc.name]}"
            )
        from portkit.findings import CandleProgram  # with the first finding (`portkit.rules.base.location`)

        yield self.finding(
            ctx,
            msg,
            keys=("model_type",) if isinstance(doc.value.get("model_type"), str) else (),
            candle_value=enc.mask,
            probe=self.probe_of(CandleProgram, program="no-mask"),
        )


class BertHalfPrecisionMask(EncoderRule):
    """bert.rs in f16 or bf16: the attention mask it builds is NaN on every attended position.

    ## What it does
    Flags a checkpoint that loads into candle 0.11.0's `bert` module when the program runs it in
    f16 or bf16 (`--dtype`, or `dtype` under `[tool.portkit]`).

    ## Why is this bad?
    `get_extended_attention_mask` (bert.rs:515-528) computes `(1 - mask) * f32::MIN` with
    `f32::MIN` cast to the model's dtype. -3.4e38 is past f16's range (and rounds past bf16's
    largest finite value), so it becomes -inf, and `0 * -inf` is NaN: every attended position of
    every text gets a NaN score, whether the program passes a mask or `None` (bert.rs:505-508
    builds a mask of ones then). Every embedding is NaN; nothing fails.

    ## Example
    `BertModel::load(vb, &config)` with `VarBuilder::from_mmaped_safetensors(.., DType::F16, ..)`.

    ## Fix
    Run candle's `bert` in f32 (candle converts the weights at load); the published checkpoints
    are small enough. transformers uses `torch.finfo(dtype).min` of the dtype itself.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-528.

    ## Verification
    numeric: `portkit verify --dtype f16` runs candle's module at that dtype on the corpus:
    CONFIRMED when candle's embeddings are NaN or inf (docs/embeddings.md); at f32 nothing fires.

    ## References
    - https://github.com/huggingface/candle/blob/0.11.0/candle-transformers/src/models/bert.rs#L515-L528
    """

    code = "PK618"
    probe_measure = "non-finite"
    name = "bert-half-precision-mask-nan"
    severity = "error"
    effect = "silent"
    fix_title = "Run candle's bert in f32"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = encoder_config(ctx)
        dtype = ctx.target.dtype
        if enc is None or enc.name != "bert" or dtype not in ("f16", "bf16"):
            return
        msg = (
            f"{enc.who} in {dtype} builds its attention mask as `(1 - mask) * f32::MIN` cast to {dtype} "
            "(bert.rs:515-528): "
            f"f32::MIN is -inf in {dtype} and 0 * -inf is NaN, so every attended position, and every embedding, is "
            "NaN, with a mask or without; run it in f32"
        )
        yield self.finding(
            ctx, msg, keys=(), candle_value="NaN", transformers_value=f"finite (torch.finfo({dtype}).min)"
        )


RULES = (EncoderPaddingMask, BertHalfPrecisionMask)
