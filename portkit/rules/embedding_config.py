"""PK612-PK615: config.json keys (and values) (and ModernBERT's tensor names) candle 0.11.0's encoder modules
cannot read as transformers 5 saves them.

transformers 5 saves some encoder configs under other keys than the ones candle's serde `Config`
reads (ModernBERT's `norm_eps` and `rope_parameters`; XLM-R without `position_embedding_type`),
and nomic_bert.rs reads GPT-2-style keys (`n_embd`, ...) that it defaults when absent. The facts
are data in `portkit.encoders` (`REQUIRED`, `SAVED_AS`, `NOMIC_KEYS`), checked against the
native wheel's `encoder_config` (tests/native/test_encoder_config_oracle.py).
"""

from __future__ import annotations

from portkit.candle_release import Span
from portkit.encoders import ACTIVATIONS, ENUM_VALUES, KEY_PAIRS, NOMIC_DEFAULTS, NOMIC_KEYS, REQUIRED, SAVED_AS
from portkit.rules.base import Context
from portkit.rules.encoder_rule import EncoderRule, encoder_config

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable

    from portkit.findings import Finding


_ABSENT = object()


def _get(cfg: dict, dotted: str) -> object:
    node: object = cfg
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _with(cfg: dict, dotted: str, value: object) -> dict:
    """The top-level entry of `cfg` that holds `dotted`, with the value there replaced: {key: new}."""
    import copy

    head, *rest = dotted.split(".")
    if not rest:
        return {head: value}
    inner = copy.deepcopy(cfg[head])
    node = inner
    for part in rest[:-1]:
        node = node[part]
    node[rest[-1]] = value
    return {head: inner}


def _has(cfg: dict, dotted: str) -> bool:
    return _get(cfg, dotted) is not _ABSENT


def _saved(cfg: dict, encoder: str, key: str) -> str:
    other = SAVED_AS.get((encoder, key))
    return f"transformers 5 saved it as `{other}`" if other is not None and _has(cfg, other) else "absent"


class EncoderConfigMissingField(EncoderRule):
    """candle's encoder module refuses the config: a key its serde `Config` requires is absent.

    ## What it does
    Lists the keys the module's `Config` requires (no serde default, not an `Option`) that
    config.json lacks, and where transformers 5 saved their values instead, when it did.

    ## Why is this bad?
    `serde_json::from_str::<Config>` fails with ``missing field `X` `` before anything loads:
    the program stops at its first line. transformers 5 saves ModernBERT's `layer_norm_eps` as
    `norm_eps` and its two rope bases inside `rope_parameters`, and drops XLM-R's
    `position_embedding_type`, so checkpoints it writes never load in candle 0.11.0.

    ## Example
    ```json
    {"model_type": "modernbert", "norm_eps": 1e-05, "rope_parameters": {"full_attention": {"rope_theta": 160000.0}}}
    ```

    ## Fix
    Add each missing key with transformers' value (the message says which key holds it).

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:57-75, distilbert.rs:58-72, xlm_roberta.rs:8-22,
    modernbert.rs:21-39, jina_bert.rs:23-36.

    ## Verification
    crash: candle's load must fail with ``missing field `X` `` for the first missing key.

    ## References
    - candle-transformers-0.11.0/src/models/modernbert.rs:21-39
    - transformers 5 models/modernbert/configuration_modernbert.py (`norm_eps`, `rope_parameters`)
    """

    code = "PK612"
    name = "encoder-config-missing-field"
    severity = "error"
    effect = "load-error"
    fix_title = "Add the keys candle's encoder Config requires"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = encoder_config(ctx)
        if enc is None:
            return
        missing = [k for k in REQUIRED[enc.name] if k not in doc.value]
        if not missing:
            return
        where = [f"`{k}` ({_saved(doc.value, enc.name, k)})" for k in missing]
        msg = (
            f"{enc.who} `Config` requires {', '.join(where)}: `serde_json::from_str` fails with ``missing field "
            f"`{missing[0]}` ``"
        )
        yield self.finding(
            ctx,
            msg,
            location=None,
            transformers_value=None,
            candle_value=missing,
            expect=f"missing field `{missing[0]}`",
        )


#: candle_nn::Activation's variants that carry a value (activation.rs:21-22): their bare name is refused otherwise
_NEWTYPE_VARIANTS = ("elu", "leakyrelu")


def refused_values(cfg: dict, encoder: str) -> list[tuple[str, object, tuple[str, ...] | None]]:
    """(key, value, accepted) for each value the module's serde enums refuse, in the file's order
    (serde stops at the first one it reads). `accepted` is None for candle_nn::Activation's long list."""
    checks: dict[str, tuple[str, ...] | None] = {k: v for (e, k), v in ENUM_VALUES.items() if e == encoder}
    act = ACTIVATIONS[encoder]
    if act.key is not None:
        checks[act.key] = tuple(act.computes) if len(act.computes) <= 4 else None
    out = []
    for key, value in cfg.items():
        if key not in checks:
            continue
        accepted = checks[key]
        ok = value in (accepted if accepted is not None else act.computes) if isinstance(value, str) else False
        if not ok:
            out.append((key, value, accepted))
    return out


def serde_refusal(value: object, accepted: tuple[str, ...] | None) -> str:
    """The start of serde's message for a refused enum value ("" where portkit does not predict the
    words); `accepted` None: the key is a candle_nn::Activation, where `elu` needs its value."""
    if not isinstance(value, str):
        return ""
    return (
        "expected newtype variant" if accepted is None and value in _NEWTYPE_VARIANTS else f"unknown variant `{value}`"
    )


class EncoderConfigValueRefused(EncoderRule):
    """candle's encoder module refuses the config: a value its serde enums do not know.

    ## What it does
    Checks the values candle's `Config` reads into an enum: the activation (`hidden_act`,
    DistilBERT's `activation`) and `position_embedding_type`, against the variants the module
    declares, and names the first one serde meets.

    ## Why is this bad?
    `serde_json::from_str::<Config>` fails with ``unknown variant `X` `` before anything loads.
    bert.rs knows `gelu`, `geluapproximate` and `relu` only: a BERT checkpoint saved with
    `gelu_new` or `relative_key` positions never loads; distilbert.rs knows `gelu` and `relu`.

    ## Example
    ```json
    {"model_type": "bert", "hidden_act": "gelu_new"}
    ```

    ## Fix
    None in config.json that keeps the model: the program must build the module with the
    activation the checkpoint was trained with (a local copy of the module).

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:17-53, distilbert.rs:20-55, jina_bert.rs:15-29,
    xlm_roberta.rs:16; candle-nn-0.11.0/src/activation.rs:5-25.

    ## Verification
    crash: candle's load must fail with ``unknown variant `X` `` for the first refused value.

    ## References
    - candle-transformers-0.11.0/src/models/bert.rs:17-53
    """

    code = "PK615"
    name = "encoder-config-value-refused"
    severity = "error"
    effect = "load-error"
    fix_title = "Build the module with the activation the checkpoint was trained with"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = encoder_config(ctx)
        if enc is None:
            return
        refused = refused_values(doc.value, enc.name)
        if not refused:
            return
        key, value, accepted = refused[0]
        known = (
            f"it knows {', '.join(f'`{a}`' for a in accepted)}"
            if accepted
            else "it knows candle_nn::Activation's names"
        )
        more = f" (and {', '.join(f'`{k}`' for k, _, _ in refused[1:])})" if refused[1:] else ""
        msg = (
            f"{enc.who} `Config` refuses `{key}` {value!r}{more}: {known}; `serde_json::from_str` fails before "
            "anything loads"
        )
        yield self.finding(
            ctx,
            msg,
            keys=(key,),
            transformers_value=value,
            candle_value=list(accepted) if accepted else None,
            expect=serde_refusal(value, accepted),
        )


class NomicBertKeysDefaulted(EncoderRule):
    """nomic_bert.rs reads GPT-2-style keys and defaults them: transformers' keys are ignored.

    ## What it does
    Flags a nomic_bert config that gives a size under transformers' key (`hidden_size`, ...)
    but not under the key candle's `nomic_bert::Config` reads (`n_embd`, ...), and says the value
    candle uses instead (its `Default`).

    ## Why is this bad?
    The struct is `#[serde(default)]`: a missing key is no error, candle builds a 768-wide,
    12-layer model, and the load fails on the first tensor's shape (or, if the sizes happen to
    match, runs another model).

    ## Example
    ```json
    {"model_type": "nomic_bert", "hidden_size": 64}
    ```

    ## Fix
    Add the GPT-2-style keys with transformers' values (`n_embd` = `hidden_size`, ...).

    ## Candle source
    candle-transformers-0.11.0/src/models/nomic_bert.rs:20-40 (`#[serde(default)] struct Config`), :42-62 (`Default`).

    ## Verification
    crash: candle's load must fail with a shape mismatch.

    ## References
    - candle-transformers-0.11.0/src/models/nomic_bert.rs:20-62
    """

    code = "PK613"
    name = "nomic-bert-keys-defaulted"
    severity = "error"
    effect = "load-error"
    fix_title = "Add nomic_bert's GPT-2-style keys"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = encoder_config(ctx)
        if enc is None or enc.name != "nomic_bert":
            return
        ignored = {
            t: c
            for t, c in NOMIC_KEYS.items()
            if t in doc.value and c not in doc.value and doc.value[t] != NOMIC_DEFAULTS[c]
        }
        if not ignored:
            return
        parts = [
            f"`{t}` {doc.value[t]!r} (candle reads `{c}`, absent: {NOMIC_DEFAULTS[c]!r})" for t, c in ignored.items()
        ]
        yield self.finding(
            ctx,
            f"{enc.who} `Config` ignores {', '.join(parts)}: it builds another model",
            keys=tuple(ignored),
            transformers_value={t: doc.value[t] for t in ignored},
            candle_value={c: NOMIC_DEFAULTS[c] for c in ignored.values()},
            fix_edits={c: doc.value[t] for t, c in ignored.items()},
            expect="shape mismatch",
        )


class ModernBertModelPrefix(EncoderRule):
    """candle's ModernBert looks its tensors up under `model.`: a ModernBertModel checkpoint has none.

    ## What it does
    Flags a modernbert checkpoint whose safetensors hold `embeddings.tok_embeddings.weight`
    (transformers' `ModernBertModel`, as sentence-transformers saves an embedding model) and not
    `model.embeddings.tok_embeddings.weight`, the name `ModernBert::load` asks for.

    ## Why is this bad?
    `ModernBert::load` hard-codes the prefix of `ModernBertForMaskedLM`'s checkpoints
    (`vb.pp("model.embeddings.tok_embeddings")`, modernbert.rs:336-345), so the load fails with
    `cannot find tensor model.embeddings.tok_embeddings.weight` before anything runs.

    ## Example
    model.safetensors from `ModernBertModel.save_pretrained`: `embeddings.tok_embeddings.weight`,
    `layers.0.attn.Wqkv.weight`, ...

    ## Fix
    Load through a renaming VarBuilder (`vb.rename_f(|n| n.strip_prefix("model.").unwrap_or(&n).to_string())`),
    or save the tensors under `model.`.

    ## Candle source
    candle-transformers-0.11.0/src/models/modernbert.rs:336-345.

    ## Verification
    crash: candle's load must fail with `cannot find tensor model.embeddings`.

    ## References
    - candle-transformers-0.11.0/src/models/modernbert.rs:336-345
    """

    code = "PK614"
    name = "modernbert-model-prefix"
    severity = "error"
    effect = "load-error"
    needs = ("config", "safetensors")
    fix_title = "Load ModernBERT's tensors without the `model.` prefix candle adds"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        (_, enc), st = encoder_config(ctx), ctx.facts.safetensors
        if enc is None or enc.name != "modernbert" or st is None:
            return
        names = st.tensors
        if "embeddings.tok_embeddings.weight" in names and "model.embeddings.tok_embeddings.weight" not in names:
            yield self.finding(
                ctx,
                f"{enc.who} `ModernBert::load` asks for `model.embeddings.tok_embeddings.weight` (modernbert.rs:339); "
                "the checkpoint names it `embeddings.tok_embeddings.weight`, as transformers' "
                "ModernBertModel saves it: the load fails",
                location=None,
                transformers_value="embeddings.tok_embeddings.weight",
                candle_value="model.embeddings.tok_embeddings.weight",
                expect="cannot find tensor model.embeddings",
            )


class EncoderLayerNormGammaBeta(EncoderRule):
    """An encoder's LayerNorm tensors are named `gamma`/`beta`, and candle asks for `weight`/`bias`.

    ## What it does
    Flags a checkpoint for one of candle's encoder modules whose safetensors hold a LayerNorm as
    `<name>.gamma` and `<name>.beta` (as older BERT checkpoints, converted from TensorFlow, name
    them) and not `<name>.weight`.

    ## Why is this bad?
    Every encoder module builds its LayerNorms with `candle_nn::layer_norm`, which up to candle
    0.11.0 asks only for `weight` and `bias` (candle-nn-0.11.0/src/layer_norm.rs:146-157): the load
    fails with `cannot find tensor embeddings.LayerNorm.weight`. transformers renames `gamma` and
    `beta` when it loads, so the checkpoint works there. candle-nn 0.11.1 reads `gamma`/`beta`
    where `weight`/`bias` are absent, so the same checkpoint loads on 0.11.1.

    ## Example
    model.safetensors: `embeddings.LayerNorm.gamma`, `embeddings.LayerNorm.beta`, ...

    ## Fix
    Save the tensors as `weight`/`bias` (load with transformers and `save_pretrained`), or run
    candle 0.11.1 or newer.

    ## Candle source
    candle-nn-0.11.0/src/layer_norm.rs:146-157; candle-nn-0.11.1/src/layer_norm.rs:159-170.

    ## Verification
    crash: candle's load must fail with `cannot find tensor` and the LayerNorm's `weight`.

    ## References
    - candle-nn-0.11.0/src/layer_norm.rs:146-157
    """

    code = "PK623"
    name = "encoder-layernorm-gamma-beta"
    severity = "error"
    effect = "load-error"
    needs = ("config", "safetensors")
    fix_title = "Name the LayerNorm tensors `weight`/`bias`, or run candle 0.11.1"
    probe_kind = "crash"
    holds = Span(
        until="0.11.1", until_by="candle-nn 0.11.1's layer_norm reading `gamma`/`beta` (layer_norm.rs:159-170)"
    )

    def check(self, ctx: Context) -> Iterable[Finding]:
        (doc, enc), st = encoder_config(ctx), ctx.facts.safetensors
        if enc is None or st is None:
            return
        names = set(st.tensors)
        renamed = sorted(n for n in names if n.endswith(".gamma") and f"{n[: -len('gamma')]}weight" not in names)
        if not renamed:
            return
        first = renamed[0][: -len("gamma")] + "weight"
        more = f" and {len(renamed) - 1} more" if len(renamed) > 1 else ""
        yield self.finding(
            ctx,
            f"{enc.who} builds each LayerNorm with `candle_nn::layer_norm`, which asks for `weight`/`bias`; the "
            "checkpoint "
            f"names them `gamma`/`beta` (`{renamed[0]}`{more}), which transformers renames when it loads; the load "
            f"fails on `{first}`",
            location=None,
            transformers_value=renamed[0],
            candle_value=first,
            # bert.rs retries under `{model_type}.` and reports the first load's error, which names an unprefixed tensor
            expect="cannot find tensor"
            if "." in first and first.split(".")[0] == doc.value.get("model_type")
            else f"cannot find tensor {first}",
        )


class EncoderConfigKeysDisagree(EncoderRule):
    """candle and transformers read one value under two keys, and config.json gives them different values.

    ## What it does
    For each value candle's encoder `Config` reads under another key than transformers 5
    (`portkit.encoders.KEY_PAIRS`: ModernBERT's `layer_norm_eps` against `norm_eps` and its rope
    bases against `rope_parameters`; nomic_bert's `layer_norm_epsilon` and `rotary_emb_base`,
    defaulted when absent, against `layer_norm_eps` and `rope_parameters.rope_theta`), flags a
    config where the two differ.

    ## Why is this bad?
    The checkpoint loads, every shape fits, and candle runs another epsilon or another rope base
    than the one the model was trained with: every hidden state differs. It happens when a
    config is given candle's keys by hand (the PK612 fix) and transformers' keys change later,
    or when a nomic_bert config gives only transformers' keys and candle's defaults differ.

    ## Example
    ```json
    {"model_type": "modernbert", "layer_norm_eps": 1e-05, "norm_eps": 0.001}
    ```

    ## Fix
    Give candle's key transformers' value (`portkit fix --write`).

    ## Candle source
    candle-transformers-0.11.0/src/models/modernbert.rs:21-39, nomic_bert.rs:20-62.

    ## Verification
    numeric: portkit verify runs sentence-transformers a second time with transformers' keys set to
    what candle reads (the counterfactual reference); CONFIRMED when candle is out of its floor
    against the checkpoint as saved and within it against that reference.

    ## References
    - transformers 5 models/modernbert/configuration_modernbert.py (`norm_eps`, `rope_parameters`)
    """

    code = "PK617"
    name = "encoder-config-keys-disagree"
    severity = "warning"
    effect = "silent"
    fix_title = "Give candle's key transformers' value"
    probe_kind = "numeric"

    def check(self, ctx: Context) -> Iterable[Finding]:
        doc, enc = encoder_config(ctx)
        if enc is None:
            return
        cfg = doc.value
        differing = []
        for pair in (p for p in KEY_PAIRS if p.encoder == enc.name):
            theirs = _get(cfg, pair.transformers_path)
            ours = cfg.get(pair.candle_key, pair.candle_default)
            if pair.candle_key not in cfg and pair.candle_default is None:
                continue  # candle requires the key: PK612
            if (
                theirs is _ABSENT
                or not isinstance(theirs, (int, float))
                or not isinstance(ours, (int, float))
                or float(theirs) == float(ours)
            ):
                continue
            differing.append((pair, theirs, ours))
        if not differing:
            return
        parts = [
            f"`{p.candle_key}` {ours!r}{'' if p.candle_key in cfg else ' (absent: its default)'} where "
            f"transformers reads `{p.transformers_path}` {theirs!r} ({p.source})"
            for p, theirs, ours in differing
        ]
        patch: dict = {}
        for p, _, ours in differing:
            patch.update(_with({**cfg, **patch}, p.transformers_path, ours))
        from portkit.findings import ReferenceEdit  # with the first finding (`portkit.rules.base.location`)

        yield self.finding(
            ctx,
            f"{enc.who} reads {'; '.join(parts)}: every hidden state differs",
            keys=tuple(p.candle_key for p, _, _ in differing if p.candle_key in cfg),
            transformers_value={p.transformers_path: t for p, t, _ in differing},
            candle_value={p.candle_key: o for p, _, o in differing},
            fix_edits={p.candle_key: t for p, t, _ in differing},
            probe=self.probe_of(ReferenceEdit, config=patch),
        )


RULES = (
    EncoderConfigMissingField,
    EncoderConfigValueRefused,
    NomicBertKeysDefaulted,
    ModernBertModelPrefix,
    EncoderLayerNormGammaBeta,
    EncoderConfigKeysDisagree,
)
