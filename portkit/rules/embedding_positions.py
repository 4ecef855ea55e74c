"""PK620: a RoBERTa-family checkpoint loaded with bert.rs, which counts positions from 0.

candle's bert example (and most candle embedding programs) loads every checkpoint with
`BertModel`. A RoBERTa, XLM-R or CamemBERT checkpoint has BERT's tensor names and every key
bert.rs's serde `Config` requires, so it loads there too, and xlm_roberta.rs refuses the XLM-R
config transformers 5 saves (PK612): the module that loads is the one that counts positions
otherwise.
"""

from __future__ import annotations

from portkit.encoders import REQUIRED
from portkit.rules.base import Context
from portkit.rules.embedding_config import refused_values
from portkit.rules.encoder_rule import EncoderRule, encoder_config

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


def bert_rs_loads(cfg: dict) -> bool:
    """bert.rs's serde `Config` reads this config: every key it requires, no value it refuses."""
    return all(k in cfg for k in REQUIRED["bert"]) and not refused_values(cfg, "bert")


class RobertaThroughBertPositions(EncoderRule):
    """A RoBERTa-family checkpoint that bert.rs loads: its position ids would start at 0.

    ## What it does
    Flags a checkpoint that belongs in candle 0.11.0's `xlm_roberta` module (XLM-R, RoBERTa,
    CamemBERT) when its config also parses as bert.rs's `Config`, so that `BertModel::load`, as
    candle's bert example calls it, loads it without complaint.

    ## Why is this bad?
    bert.rs gives token i the position id i (bert.rs:193-196, "TODO: Proper absolute positions?").
    RoBERTa's positions start after the padding index: `pad_token_id + 1`, counting only the
    tokens that are not pads (xlm_roberta.rs:65-83; transformers' `create_position_ids_from_input_ids`).
    Through bert.rs every token reads the position embedding of the token `pad_token_id + 1` places
    before it: every vector changes and nothing fails. transformers 5 saves XLM-R configs without
    `position_embedding_type`, which xlm_roberta.rs requires (PK612) and bert.rs defaults, so the
    module that loads is the wrong one.

    ## Example
    `BertModel::load(vb, &serde_json::from_str::<bert::Config>(&config)?)` on a `model_type: "xlm-roberta"` checkpoint.

    ## Fix
    Load it with `xlm_roberta::XLMRobertaModel::new(&config, vb)` (add `"position_embedding_type": "absolute"`
    to config.json where PK612 says it is missing).

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:186-200, xlm_roberta.rs:65-83.

    ## Verification
    numeric: portkit verify's embedding run loads the checkpoint with bert.rs too (the
    counterfactual program) and runs the padded batch through it against sentence-transformers;
    CONFIRMED when that program is out of its floor while xlm_roberta.rs's stays within
    (docs/embeddings.md).

    ## References
    - https://github.com/huggingface/candle/blob/0.11.0/candle-transformers/src/models/bert.rs#L186-L200
    - https://github.com/huggingface/candle/blob/0.11.0/candle-transformers/src/models/xlm_roberta.rs#L65-L83
    """

    code = "PK620"
    name = "roberta-through-bert-positions"
    severity = "warning"
    effect = "silent"
    fix_title = "Load RoBERTa-family checkpoints with xlm_roberta.rs, not bert.rs"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = encoder_config(ctx)
        if enc is None or enc.name != "xlm_roberta" or not bert_rs_loads(doc.value):
            return
        pad = doc.value.get("pad_token_id")
        start = f"{pad + 1}" if isinstance(pad, int) and not isinstance(pad, bool) else "`pad_token_id` + 1"
        msg = (
            "bert.rs's `BertModel::load` (candle's bert example) loads this "
            f"{doc.value.get('model_type', 'RoBERTa-family')} checkpoint too, "
            f"and counts positions from 0 (bert.rs:193-196) where RoBERTa counts from {start} "
            "(xlm_roberta.rs:65-83): every vector differs; load it with `xlm_roberta::XLMRobertaModel`"
        )
        from portkit.findings import CandleProgram  # with the first finding (`portkit.rules.base.location`)

        yield self.finding(
            ctx,
            msg,
            keys=("model_type",) if isinstance(doc.value.get("model_type"), str) else (),
            candle_value=0,
            transformers_value=start,
            probe=self.probe_of(CandleProgram, program="bert-module"),
        )


RULES = (RobertaThroughBertPositions,)
