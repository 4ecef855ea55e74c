"""PK601-PK619: the sentence-transformers pipeline a candle program must reproduce.

candle's encoder modules end at the encoder: `BertModel::forward` returns the sequence output
(candle-transformers-0.11.0/src/models/bert.rs:495-512) and nothing in candle-transformers reads
`modules.json`. What sentence-transformers does after the encoder (Pooling, Dense, Normalize, a
prompt prefix, truncation at `max_seq_length`) is code the candle program has to write, and
candle's own bert example (https://github.com/huggingface/candle/blob/main/candle-examples/examples/bert/main.rs)
does one version of it: masked mean pooling (lines 184-199, `--include-padding-embeddings` to
average the pads too) and L2 normalisation on by default (`--normalize-embeddings`, line 46-47,
`normalize_l2` line 227). The facts are `ModelFacts.sentence_pipeline`
(`portkit.model.sentence_pipeline`); every rule here is static: embedding verify will probe them.
"""

from __future__ import annotations

from portkit.rules.base import Context, Rule, location

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any, ClassVar

    from portkit.findings import Finding, ProbeKind, Severity
    from portkit.model.sentence_pipeline import PipelineModule, SentencePipeline

EXAMPLE = "https://github.com/huggingface/candle/blob/main/candle-examples/examples/bert/main.rs"
NOT_PROBED = (
    "a fact about the sentence-transformers pipeline; portkit verify's embedding run does not judge it per rule yet"
)

_POOLING_DOES = {
    "mean": "average the encoder's output over the attended tokens only (attention mask 1), never over pads",
    "cls": "take the first token's vector ([CLS]) of the encoder's output",
    "max": "take the element-wise maximum over the attended tokens (pads set to a large negative value first)",
    "mean_sqrt_len_tokens": "sum over the attended tokens and divide by the square root of their count",
    "weightedmean": "average the attended tokens weighted by position (1, 2, ..., n)",
    "lasttoken": "take the last attended token's vector (with left padding the last column; with right padding the "
    "row's last token before the pads)",
}


class _PipelineRule(Rule):
    group = "embedding"
    families: ClassVar[tuple[str, ...]] = ("*",)
    severity: ClassVar[Severity] = "warning"
    probe_kind: ClassVar[ProbeKind] = "static-only"
    not_probed = NOT_PROBED
    needs = ("config",)

    def pipeline(self, ctx: Context) -> SentencePipeline | None:
        return getattr(ctx.facts, "sentence_pipeline", None)

    def at_module(self, ctx: Context, p: SentencePipeline, m: PipelineModule, message: str, **kw: Any) -> Finding:
        return self.finding(ctx, message, filename=p.modules_path, location=location((m.row, m.column)), **kw)


class SentencePipelineSummary(_PipelineRule):
    """The sentence-transformers pipeline, as one line: what a candle program must reproduce.

    ## What it does
    Names the modules `modules.json` chains after the encoder, Pooling's mode, any Dense and
    Normalize, and `max_seq_length` from sentence_bert_config.json, for example
    `Transformer -> Pooling(mean) -> Normalize, max_seq_length 256`.

    ## Why is this bad?
    It is not: it is the summary the other PK6xx findings refine. An embedding model's vectors are
    the encoder's output *and* these steps; candle runs the encoder only.

    ## Example
    The published sentence-transformers/all-MiniLM-L6-v2 directory.

    ## Fix
    Nothing to fix; write the listed steps after the candle encoder.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512 (`BertModel::forward` returns the
    sequence output, no pooling); nothing in candle-transformers 0.11.0 reads modules.json.

    ## Verification
    static: a summary of the files.

    ## References
    - sentence-transformers 6.3.0 `base/model.py` (`_load_sbert_model` reads modules.json in order)
    """

    code = "PK601"
    name = "sentence-pipeline"
    severity = "info"
    fix_title = "Reproduce the listed steps after the candle encoder"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        if p is None or not p.modules:
            return
        yield self.finding(
            ctx,
            f"the sentence-transformers pipeline: {p.summary()}; candle runs the encoder only (bert.rs:495-512), the "
            "rest is the program's",
            filename=p.modules_path,
            location=None,
            transformers_value=p.summary(),
        )


class PoolingInProgram(_PipelineRule):
    """Pooling: the program must pool the encoder's output the way the Pooling module does.

    ## What it does
    Reports the Pooling module's mode (1_Pooling/config.json `pooling_mode`, or the legacy
    `pooling_mode_*` booleans) and `include_prompt: false`. Mean pooling is info (candle's bert
    example pools that way); any other mode, several modes, or `include_prompt: false` is a warning.

    ## Why is this bad?
    candle's encoder returns one vector per token. sentence-transformers pools them: mean over the
    attended tokens only, or the first token, the maximum, the last token... A program that
    averages over the pads too (the bert example's `--include-padding-embeddings`) or takes the
    wrong token gets other vectors, silently. `include_prompt: false` excludes the prompt's tokens
    from the pooling, which the program must count and skip.

    ## Example
    `{"pooling_mode": "cls"}` in 1_Pooling/config.json.

    ## Fix
    Pool as the message says; with `include_prompt: false`, drop the prompt's token positions from
    the mask before pooling.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512 (sequence output, no pooling); the
    bert example's mean pooling: candle-examples/examples/bert/main.rs:184-199 (candle main).

    ## Verification
    numeric: portkit verify's embedding run pools candle's output of one padded batch over every
    position, pads included (the counterfactual program), and over the attended tokens only (the
    program the message asks for), both against sentence-transformers; CONFIRMED when only the
    first is out of its floor, with the worst cosine it costs (docs/embeddings.md).

    ## References
    - sentence-transformers 6.3.0 `sentence_transformer/modules/pooling.py` (`POOLING_MODES`, `forward`)
    - https://github.com/huggingface/candle/blob/main/candle-examples/examples/bert/main.rs
    """

    code = "PK602"
    name = "pooling-in-program"
    fix_title = "Pool the encoder output as the Pooling module does"
    probe_kind = "numeric"
    probe_run = "embedding"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        if p is None:
            return
        for m in p.of_kind("Pooling"):
            if not m.pooling_mode:
                continue
            does = "; and ".join(_POOLING_DOES.get(mode, mode) for mode in m.pooling_mode)
            concat = " and concatenate the results in this order" if len(m.pooling_mode) > 1 else ""
            plain = m.pooling_mode == ("mean",) and m.include_prompt
            prompt = (
                "" if m.include_prompt else "; include_prompt is false: leave the prompt's tokens out of the pooling"
            )
            example = (
                "as candle's bert example does by default (main.rs:191-199)"
                if m.pooling_mode == ("mean",)
                else "which candle's bert example does not do (it mean-pools, main.rs:184-199)"
            )
            from portkit.findings import CandleProgram  # with the first finding (`portkit.rules.base.location`)

            yield self.at_module(
                ctx,
                p,
                m,
                f"Pooling({'+'.join(m.pooling_mode)}): the program must {does}{concat}, {example}{prompt}",
                severity="info" if plain else "warning",
                transformers_value={"pooling_mode": list(m.pooling_mode), "include_prompt": m.include_prompt},
                probe=self.probe_of(CandleProgram, program="pool-over-pads"),
            )


class NormalizeInProgram(_PipelineRule):
    """Normalize: the program must L2-normalise the pooled vector.

    ## What it does
    Flags a Normalize module in modules.json (its folder is optional: sentence-transformers 6.3.0
    builds a default Normalize when 2_Normalize is absent, as in all-MiniLM-L6-v2).

    ## Why is this bad?
    sentence-transformers divides each vector by its L2 norm; a program that skips it returns
    vectors of another length, and dot products that are not cosine similarities.

    ## Example
    `{"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}` in modules.json.

    ## Fix
    L2-normalise after pooling (and after any Dense), as the bert example's `normalize_l2` does.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512 (no normalisation in the module);
    candle-examples/examples/bert/main.rs:200-204, 227 (candle main: `normalize_l2`, on by default).

    ## Verification
    static for now; the embedding run of portkit verify normalises as a program does.

    ## References
    - sentence-transformers 6.3.0 `base/modules/normalize.py`
    """

    code = "PK603"
    name = "normalize-in-program"
    severity = "info"
    fix_title = "L2-normalise the pooled vector"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        if p is None:
            return
        for m in p.of_kind("Normalize")[:1]:
            folder = (
                ""
                if m.folder_exists
                else f" (no {m.path or '.'} folder on disk: sentence-transformers loads the default Normalize)"
            )
            yield self.at_module(
                ctx,
                p,
                m,
                f"Normalize is in the pipeline{folder}: the program must divide each pooled vector by its L2 norm",
            )


class NoNormalizeInPipeline(_PipelineRule):
    """No Normalize: the vectors are not unit length, and candle's bert example normalises by default.

    ## What it does
    Flags a pipeline with Pooling and no Normalize module.

    ## Why is this bad?
    sentence-transformers returns the pooled (and Dense) vectors as they are. candle's bert
    example L2-normalises unless `--normalize-embeddings false` is passed, so its vectors differ
    in length from the model's; a dot product or a Euclidean distance then differs too.

    ## Example
    modules.json with Transformer and Pooling only.

    ## Fix
    Do not normalise (`--normalize-embeddings false` in the bert example).

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512; candle-examples/examples/bert/main.rs:45-47
    and 200-204 (candle main: `normalize_embeddings` defaults to true).

    ## Verification
    static for now.

    ## References
    - https://github.com/huggingface/candle/blob/main/candle-examples/examples/bert/main.rs
    """

    code = "PK604"
    name = "no-normalize-in-pipeline"
    fix_title = "Do not L2-normalise: the pipeline has no Normalize"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        if p is None or p.of_kind("Normalize") or not p.of_kind("Pooling"):
            return
        m = p.of_kind("Pooling")[-1]
        yield self.at_module(
            ctx,
            p,
            m,
            "the pipeline has no Normalize: sentence-transformers returns vectors that are not unit length, "
            "and candle's bert example L2-normalises unless --normalize-embeddings false (main.rs:45-47)",
        )


class DenseAfterPooling(_PipelineRule):
    """Dense: a linear layer (and activation) after pooling that the program must apply.

    ## What it does
    Flags each Dense module: its in/out features, bias and activation (2_Dense/config.json), the
    shape of `linear.weight` from the folder's model.safetensors header, and a Dense saved only as
    pytorch_model.bin (which portkit never opens and candle's VarBuilder::from_mmaped_safetensors
    cannot read).

    ## Why is this bad?
    candle's encoder files have no such module; without it the vectors have the encoder's width
    and are simply other vectors.

    ## Example
    `{"in_features": 768, "out_features": 256, "bias": true, "activation_function":
    "torch.nn.modules.activation.Tanh"}`.

    ## Fix
    Load the Dense weights (`linear.weight`, `linear.bias`) with a candle `Linear` from the
    folder's model.safetensors and apply it, then the activation, after pooling.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512 (the encoder ends at the sequence output);
    candle-nn-0.11.0/src/linear.rs (`Linear`, what the program builds).

    ## Verification
    static for now.

    ## References
    - sentence-transformers 6.3.0 `base/modules/dense.py` (defaults: bias true, Tanh)
    """

    code = "PK605"
    name = "dense-after-pooling"
    fix_title = "Apply the Dense layer and its activation after pooling"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        if p is None:
            return
        for m in p.of_kind("Dense"):
            if m.config is None:
                continue  # missing or unreadable: PK608 / PK610
            act = m.activation.rsplit(".", 1)[-1]
            shape = f", linear.weight {list(m.weight_shape)}" if m.weight_shape else ""
            w = {
                None: "; no weights file in the folder",
                "pytorch_model.bin": "; its weights are pytorch_model.bin only, which candle cannot read: convert them "
                "to safetensors",
            }.get(m.weights_file, "")
            yield self.at_module(
                ctx,
                p,
                m,
                f"Dense at {m.path!r}: {m.in_features} -> {m.out_features}, bias {str(m.bias).lower()}, activation "
                f"{act}{shape}: "
                f"the program must apply it after pooling; candle's encoder modules have no such layer{w}",
                transformers_value={
                    "in_features": m.in_features,
                    "out_features": m.out_features,
                    "bias": m.bias,
                    "activation_function": m.activation,
                },
            )


class PromptPrefix(_PipelineRule):
    """Prompts: a prefix sentence-transformers prepends that the program must prepend too.

    ## What it does
    Reports `prompts` and `default_prompt_name` from config_sentence_transformers.json (non-empty
    prompts only).

    ## Why is this bad?
    With `default_prompt_name`, `model.encode(text)` encodes `prompts[name] + text`; a model
    trained with "query: " prefixes gives other vectors without it. The tokenizers crate and
    candle know nothing of it.

    ## Example
    `{"prompts": {"query": "query: ", "document": ""}, "default_prompt_name": "query"}`.

    ## Fix
    Prepend the prompt's text to each input before tokenizing (the default one when set, else the
    one for the task).

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512 (token ids in, no text); the bert
    example encodes the text as given.

    ## Verification
    static for now.

    ## References
    - sentence-transformers 6.3.0 `base/model.py` (`prompts`, `default_prompt_name`, `_validate_prompts`)
    """

    code = "PK606"
    name = "prompt-prefix"
    fix_title = "Prepend the prompt text before tokenizing"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        if p is None or p.st_config_path is None:
            return
        used = {k: v for k, v in p.prompts.items() if v}
        if not used:
            return
        default = p.default_prompt_name
        head = (
            f"default_prompt_name {default!r}: every input becomes {used.get(default, '')!r} + text"
            if default
            else "no default_prompt_name: the caller picks one"
        )
        yield self.finding(
            ctx,
            f"{head}; prompts {used!r}: the program must prepend the same text before tokenizing",
            filename=p.st_config_path,
            location=None,
            transformers_value={"prompts": used, "default_prompt_name": default},
        )


class MaxSeqLengthDiffers(_PipelineRule):
    """max_seq_length: sentence-transformers truncates to one length, the program to another.

    ## What it does
    Compares sentence_bert_config.json's `max_seq_length` (what sentence-transformers truncates
    to) with tokenizer.json's `truncation.max_length` (what the tokenizers crate truncates to when
    a program loads tokenizer.json as saved) and with config.json's `max_position_embeddings`.

    ## Why is this bad?
    A text longer than the shorter limit is cut at different places: the vectors differ for every
    long input. With no truncation in tokenizer.json (or the bert example's `--prompt`, which
    removes it, main.rs:118-121), a text past `max_position_embeddings` fails in candle's
    position embedding instead.

    ## Example
    all-MiniLM-L6-v2: `max_seq_length` 256, tokenizer.json truncation 128, 512 positions.

    ## Fix
    Set the tokenizer's truncation to `max_seq_length` in the program (`with_truncation`), or
    edit tokenizer.json's `truncation.max_length` to it.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:162 (position embeddings of
    `max_position_embeddings` rows); tokenizers-0.22.2/src/tokenizer/mod.rs (truncation applied
    from tokenizer.json); candle-examples/examples/bert/main.rs:118-121 (candle main).

    ## Verification
    static for now.

    ## References
    - sentence-transformers 6.3.0 `base/modules/transformer.py` (`max_seq_length` becomes the tokenizer's
      `model_max_length`)
    """

    code = "PK607"
    name = "max-seq-length-differs"
    fix_title = "Truncate to max_seq_length in the program"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        if p is None or p.max_seq_length is None or p.sbert_config_path is None:
            return
        msl = p.max_seq_length
        tok = ctx.facts.tokenizer.tokenizer if ctx.facts.tokenizer is not None else None
        trunc = tok.value.get("truncation") if tok is not None else None
        tmax = trunc.get("max_length") if isinstance(trunc, dict) else None
        cfg = (
            ctx.facts.config.value if ctx.facts.config is not None and isinstance(ctx.facts.config.value, dict) else {}
        )
        mpe = cfg.get("max_position_embeddings")
        parts = []
        if isinstance(tmax, int) and tmax != msl:
            parts.append(
                f"tokenizer.json truncates to {tmax}, which the tokenizers crate applies as saved (candle's bert "
                "example keeps it for its batch and removes it for --prompt, main.rs:120-121)"
            )
        elif tok is not None and trunc is None and isinstance(mpe, int) and msl < mpe:
            parts.append(
                "tokenizer.json has no truncation, so the crate feeds the whole text (up to the position limit)"
            )
        if isinstance(mpe, int) and msl > mpe:
            parts.append(f"max_seq_length is over max_position_embeddings {mpe}")
        if not parts:
            return
        yield self.finding(
            ctx,
            f"sentence-transformers truncates to max_seq_length {msl} (sentence_bert_config.json); "
            + "; ".join(parts)
            + f"; the model has {mpe} positions" * isinstance(mpe, int),
            filename=p.sbert_config_path,
            location=location(p.max_seq_length_at),
            transformers_value=msl,
            candle_value=tmax,
        )


class PipelineModuleMissing(_PipelineRule):
    """A Pooling or Dense module listed in modules.json whose folder or config.json is missing.

    ## What it does
    Flags a Pooling or Dense module whose folder, or the config.json in it, is not in the
    directory. (A Normalize module needs no folder.)

    ## Why is this bad?
    sentence-transformers 6.3.0 reads no config for it (`Module.load_config` returns {}) and fails
    to load the model with `TypeError: Pooling.__init__() missing 1 required positional argument:
    'embedding_dimension'` (for Dense, `missing 2 required positional arguments: 'in_features' and
    'out_features'`). There is no reference to port: the
    directory is incomplete.

    ## Example
    modules.json lists `1_Pooling`; the directory has no 1_Pooling folder.

    ## Fix
    Restore the folder from the published model.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512 (candle never reads these folders; the
    program's pooling is all there is).

    ## Verification
    static: sentence-transformers' load failure was measured with `SentenceTransformer(path, local_files_only=True)`.

    ## References
    - sentence-transformers 6.3.0 `base/modules/module.py` (`load_config`)
    """

    code = "PK608"
    name = "pipeline-module-missing"
    effect = "load-error"
    fix_title = "Restore the module's folder and config.json"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        for pr in p.problems if p is not None else ():
            if pr.kind == "missing":
                yield self.finding(ctx, pr.message, filename=pr.file, location=location((pr.row, pr.column)))


class PipelineModuleCustom(_PipelineRule):
    """A module type other than Transformer, Pooling, Dense and Normalize: custom code, never run.

    ## What it does
    Names each module of modules.json whose type is not one of the four portkit reads: another
    sentence-transformers class (LayerNorm, Router, StaticEmbedding...) or a class outside
    sentence-transformers (custom code, loaded only with `trust_remote_code`).

    ## Why is this bad?
    Its computation is not in the files portkit reads; portkit never imports or executes it, and
    the candle program has to reimplement it from its source.

    ## Example
    `{"type": "custom_st.CustomPooling", "path": "1_Custom"}`.

    ## Fix
    Read the module's source and write its step in the program.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512 (the encoder only).

    ## Verification
    static: the module is never executed.

    ## References
    - sentence-transformers 6.3.0 `base/model.py` (`_load_module_class_from_ref`)
    """

    code = "PK609"
    name = "pipeline-module-custom"
    fix_title = "Reimplement the module from its source"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        if p is None:
            return
        for m in p.modules:
            if m.kind == "custom":
                yield self.at_module(
                    ctx,
                    p,
                    m,
                    f"module {m.index} is {m.type!r}, custom code outside sentence-transformers (loaded only with "
                    "trust_remote_code): portkit does not run it and the program must reimplement it",
                )
            elif m.kind == "other":
                yield self.at_module(
                    ctx,
                    p,
                    m,
                    f"module {m.index} is {m.type!r}, a sentence-transformers module portkit does not read: the "
                    "program must reimplement it",
                )


class PipelineFileInvalid(_PipelineRule):
    """A pipeline file sentence-transformers cannot read: bad JSON, or the wrong shape.

    ## What it does
    Flags invalid JSON in modules.json, a module's config.json, sentence_bert_config.json or
    config_sentence_transformers.json; a modules.json that is not a list; a module without a
    `type` or `path`, or whose path leaves the directory; an unknown pooling mode.

    ## Why is this bad?
    sentence-transformers fails to load the model (`json.load`, `module_config["type"]`,
    `_validate_relative_path`, `Pooling.__init__`'s ValueError), so there is no reference.

    ## Example
    `{"0": {...}}` as modules.json.

    ## Fix
    Repair the file.

    ## Candle source
    candle-transformers-0.11.0/src/models/bert.rs:495-512 (candle never reads these files).

    ## Verification
    static.

    ## References
    - sentence-transformers 6.3.0 `base/model.py` (`_load_sbert_model`)
    """

    code = "PK610"
    name = "pipeline-file-invalid"
    effect = "load-error"
    fix_title = "Repair the pipeline file"

    def check(self, ctx: Context) -> Iterable[Finding]:
        p = self.pipeline(ctx)
        for pr in p.problems if p is not None else ():
            if pr.kind != "missing":
                yield self.finding(ctx, pr.message, filename=pr.file, location=location((pr.row, pr.column)))


RULES = (
    SentencePipelineSummary,
    PoolingInProgram,
    NormalizeInProgram,
    NoNormalizeInPipeline,
    DenseAfterPooling,
    PromptPrefix,
    MaxSeqLengthDiffers,
    PipelineModuleMissing,
    PipelineModuleCustom,
    PipelineFileInvalid,
)
