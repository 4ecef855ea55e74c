"""PK616: the MLP activation candle 0.11.0's encoder module computes, against transformers'.

Each module reads its activation its own way (`portkit.encoders.ACTIVATIONS`): bert.rs maps `gelu`
to gelu_erf as transformers does; distilbert.rs maps the same `gelu` to the tanh approximation;
modernbert.rs and nomic_bert.rs hard-code GeGLU with gelu_erf and SwiGLU with silu whatever the
config says. The checkpoint loads, every shape fits, and every vector is a little off.
"""

from __future__ import annotations

from portkit.encoders import ACT2FN_NAMES, ACTIVATIONS, same_function
from portkit.rules.base import Context
from portkit.rules.encoder_rule import EncoderRule, encoder_config

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


class EncoderActivationDiffers(EncoderRule):
    """candle's encoder module computes another MLP activation than transformers for this config.

    ## What it does
    Reads the activation transformers builds for the checkpoint (`hidden_act`, DistilBERT's
    `activation`, ModernBERT's `hidden_activation`, or its default) and the one candle's module
    computes for the same config (or hard-codes), and flags them when they are different
    functions: distilbert.rs computes the tanh approximation for `gelu` (transformers: erf),
    modernbert.rs always GELU (erf), nomic_bert.rs always SiLU.

    ## Why is this bad?
    The load succeeds and nothing fails; every hidden state after the first MLP is off. The
    tanh approximation of GELU is off by up to 4.7e-4 (at x = 2.7), which trained
    weights carry to every embedding; another function altogether (ModernBERT trained with SiLU)
    costs cosines of 0.78-0.88 (huggingface/candle#3991).

    ## Example
    ```json
    {"model_type": "distilbert", "activation": "gelu"}
    ```

    ## Fix
    None in config.json: the program must compute what transformers computes, with a local copy
    of the module that applies it (`xs.gelu_erf()` for distilbert's `gelu`).

    ## Candle source
    candle-transformers-0.11.0/src/models/distilbert.rs:20-47, modernbert.rs:170-175,
    nomic_bert.rs:290-296, bert.rs:17-45, xlm_roberta.rs:266-275; candle-nn-0.11.0/src/activation.rs:5-48.

    ## Verification
    numeric: portkit verify runs sentence-transformers a second time with the activation candle
    computes (the counterfactual reference); CONFIRMED when candle is out of its floor against the
    checkpoint as saved and within it against that reference: the activation is the whole difference.

    ## References
    - https://github.com/huggingface/candle/pull/3991 (ModernBERT's hard-coded GELU)
    - transformers 5 activations.py `ACT2CLS` (`gelu` is GELUActivation, erf)
    """

    code = "PK616"
    name = "encoder-activation-differs"
    severity = "warning"
    effect = "silent"
    fix_title = "Compute the activation transformers computes (a local copy of the module)"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = encoder_config(ctx)
        if enc is None or enc.transformers_class is None:
            return  # no transformers class (jina_bert): nothing says what the checkpoint computes
        act = ACTIVATIONS[enc.name]
        theirs = doc.value.get(act.transformers_key, act.default)
        ours = act.candle_computes(doc.value.get(act.key) if act.key else None)
        if not isinstance(theirs, str) or theirs not in ACT2FN_NAMES or ours is None or same_function(theirs, ours):
            return  # transformers cannot build it, candle refuses it (PK615), or the two agree
        read = f"for `{act.key}` {doc.value.get(act.key)!r}" if act.key else "whatever the config says"
        msg = (
            f"{enc.who} computes `{ours}` {read} ({act.source}); transformers computes `{theirs}` "
            f"(`{act.transformers_key}`): every hidden state after the first MLP differs"
        )
        keys = (act.transformers_key,) if act.transformers_key in doc.value else ()
        from portkit.findings import ReferenceEdit  # with the first finding (`portkit.rules.base.location`)

        yield self.finding(
            ctx,
            msg,
            keys=keys,
            transformers_value=theirs,
            candle_value=ours,
            probe=self.probe_of(ReferenceEdit, config={act.transformers_key: ours}),
        )


RULES = (EncoderActivationDiffers,)
