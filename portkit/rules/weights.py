"""PK2xx: safetensors tensors (from headers only) vs what the family's candle 0.11.0 module reads.

Each family module (`portkit.families.<name>`) says what its candle module asks the VarBuilder for
(`expected_tensors(values, available)`, in load order); these rules compare that table with the
checkpoint's headers. For llama, transformers' own expected table (`transformers_expected`) also
says which side of a disagreement the checkpoint is on.
"""

from __future__ import annotations

import re
import weakref
from collections import defaultdict

from portkit.rules import as_candle
from portkit.rules.base import Context, Rule, backticked
from portkit.rules.family_config import ALL_FAMILIES

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from portkit.families.view import FamilyView
    from portkit.findings import Finding, NotProbed, Severity
    from portkit.model.safetensors_header import TensorInfo


LAYER_RE = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
# candle-core-0.11.0/src/safetensors.rs:290-313
UNSUPPORTED_DTYPES = {"BOOL", "I8", "F8_E5M2", "U64", "C64"}
DUMMY_DTYPES = {"F4", "F6_E2M3", "F6_E3M2", "F8_E8M0"}
QUANTIZED_SUFFIXES = ("qweight", "qzeros", "scales", "g_idx")
# Layer parts transformers' module has when a config flag says so and that no candle module reads
# (stablelm-2-12b's per-head q/k LayerNorms, stable_lm.rs:200-216 has none).
_CONFIG_FLAG_PARTS = {"self_attn.q_layernorm": "qk_layernorm", "self_attn.k_layernorm": "qk_layernorm"}


_EXPECTED: weakref.WeakKeyDictionary[Context, dict[str, tuple[int, ...]] | None] = weakref.WeakKeyDictionary()


def expected_tensors(ctx: Context) -> dict[str, tuple[int, ...]] | None:
    """The tensors the family's candle module requests, in order, given the checkpoint's names;
    None when candle refuses the config or its sizes are degenerate (the config rules say why).
    Computed once per model: five rules read it, and an MoE table has experts x layers rows."""
    if ctx in _EXPECTED:
        return _EXPECTED[ctx]
    fam, fv, st = ctx.family, ctx.fv, ctx.facts.safetensors
    table = None
    if fam is not None and fv is not None and fv.ok and st is not None and fv.values.get("head_dim") is not None:
        table = fam.semantics.expected_tensors(fv.values, frozenset(st.tensors))
    _EXPECTED[ctx] = table
    return table


def module_name(ctx: Context) -> str:
    """The module by name, for every family (the weights rules always said "candle 0.11.0's `llama`")."""
    return f"candle {ctx.target.candle}'s `{ctx.family.name}`" if ctx.family else f"candle {ctx.target.candle}"


def config_flag(ctx: Context, key: str) -> object:
    """A key as config.json writes it (None when absent): what transformers is told."""
    doc = ctx.facts.config
    return doc.value.get(key) if doc is not None and isinstance(doc.value, dict) else None


def transformers_tie(ctx: Context) -> object:
    """`tie_word_embeddings` as transformers computes it for the family (its default when the
    key is absent), else as written."""
    ftv = ctx.ftv
    return ftv.get("tie_word_embeddings") if ftv is not None else config_flag(ctx, "tie_word_embeddings")


def transformers_expected(ctx: Context) -> dict[str, tuple[int, ...]] | None:
    """What transformers' module loads, where the family's module knows it (llama's
    `LlamaForCausalLM`), else None: the file is then what transformers wrote."""
    fam = ctx.family
    table = getattr(fam.semantics, "transformers_tensors", None) if fam is not None else None
    return table(ctx.ftv) if table is not None and ctx.ftv is not None else None


def _known_name(known: tuple[frozenset[str], frozenset[str]], name: str) -> bool:
    top, parts = known
    if name in top:
        return True
    m = LAYER_RE.match(name)
    return bool(m and m.group(2) in parts)


def weight_layers(names: Iterable[str]) -> set[int]:
    out = set()
    for n in names:
        m = LAYER_RE.match(n)
        if m:
            out.add(int(m.group(1)))
    return out


def _pattern(name: str) -> str:
    return LAYER_RE.sub(lambda m: f"model.layers.N.{m.group(2)}", name)


def is_family_name(ctx: Context, name: str, expected: dict[str, tuple[int, ...]]) -> bool:
    """Whether `name` is spelled the way the family's candle module looks tensors up: its fixed
    list where the module has one (llama), else anything under `model.` or `lm_head.` (PK202
    says which of those are unread)."""
    known = ctx.family.traits.known_tensor_names if ctx.family is not None else None
    if known is not None:
        return _known_name(known, name)
    if name.endswith(QUANTIZED_SUFFIXES):
        return False
    return name in expected or name.startswith(("model.", "lm_head."))


def _strippable_prefix(ctx: Context, name: str, expected: dict[str, tuple[int, ...]]) -> int:
    """The length of a prefix whose removal gives a name the module reads, else 0."""
    known = ctx.family.traits.known_tensor_names if ctx.family is not None else None
    i = name.find("model.", 1)
    while i > 0:
        rest = name[i:]
        if _known_name(known, rest) if known is not None else rest in expected:
            return i
        i = name.find("model.", i + 1)
    return 0


def _weights_file(ctx: Context) -> str:
    st = ctx.facts.safetensors
    assert st is not None
    return str(st.index.path if st.index is not None else st.files[0].path)


class _WeightsRule(Rule):
    group = "weights"
    families = ALL_FAMILIES  # every family with a candle module: the weights rules speak about all of them
    needs = ("config", "safetensors")

    def ready(self, ctx: Context) -> bool:
        return bool(ctx.facts.safetensors and ctx.ftv and ctx.ftv.ok and ctx.fv and ctx.fv.ok)

    @staticmethod
    def tensors(ctx: Context) -> Mapping[str, TensorInfo]:
        """The checkpoint's tensors, once `ready` holds."""
        st = ctx.facts.safetensors
        assert st is not None, "ready() checks the safetensors files"
        return st.tensors

    @staticmethod
    def config(ctx: Context) -> FamilyView:
        """candle's view of config.json, once `ready` holds."""
        assert ctx.fv is not None, "ready() checks candle's view"
        return ctx.fv

    @staticmethod
    def panics(ctx: Context) -> str | None:
        """The load function that panics on a bad layer tensor, for modules that `.unwrap()` per block."""
        return ctx.family.traits.load_panics if ctx.family is not None else None


class MissingTensor(_WeightsRule):
    """A tensor the family's candle module reads is not in the safetensors files.

    ## What it does
    Lists the tensors candle 0.11.0's module for this family asks for (embeddings, norms, and
    every tensor of the layers the weights do have) that no safetensors file holds. Whole
    missing layers are PK204; a missing `lm_head.weight` is PK205.

    ## Why is this bad?
    candle fails at load with `cannot find tensor NAME`, naming the first missing tensor in its
    load order. In `llama` and `granite` a missing tensor inside a layer is worse: their loaders
    call `.unwrap()` per block, so candle panics (exit 101) instead of returning an error.
    transformers would initialise the tensor randomly and run.

    ## Example
    `model.layers.1.mlp.up_proj.weight` absent from `model.safetensors`; or a Qwen2 checkpoint
    without `model.layers.0.self_attn.q_proj.bias` (candle's `qwen2` always reads q/k/v biases).

    ## Fix
    None in config.json; re-export the weights.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:515-525 (`Block::load(...).unwrap()` at
    :524), granite.rs:446-452, qwen2.rs:136-139 (q/k/v with bias), mistral.rs:372-386;
    candle-core-0.11.0/src/error.rs:167 (`cannot find tensor {path}`).

    ## Verification
    crash: candle must fail (or panic) naming the first missing tensor.

    ## References
    - https://github.com/huggingface/candle/issues/1632 (`Mistral::new` assumes the `model.` prefix)
    - https://github.com/huggingface/candle/issues/3448, https://github.com/huggingface/candle/issues/3457 (`cannot find
      tensor model.embed_tokens.weight`)
    - https://github.com/evilsocket/cake/issues/34 (a doubled prefix), https://github.com/ggml-org/llama.cpp/issues/9211
      (`Can not map tensor`)
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
        expected = expected_tensors(ctx)
        if expected is None:
            return
        have = self.tensors(ctx)
        present_layers = weight_layers(have)
        # lm_head is PK205's, whole missing layers PK204's
        missing = [
            n
            for n in expected
            if n not in have
            and n != "lm_head.weight"
            and (not (m := LAYER_RE.match(n)) or int(m.group(1)) in present_layers)
        ]
        if not missing:
            return
        first = missing[0]  # candle stops at the first failed request: its error names this one
        missing_top = [n for n in missing if not LAYER_RE.match(n)]
        missing_layer = [n for n in missing if LAYER_RE.match(n)]
        mod = module_name(ctx)
        panics = self.panics(ctx)
        if missing_top:
            yield self.finding(
                ctx,
                f"{mod} fails at load: the weights have no {backticked(missing_top)}; transformers would initialise "
                f"{'it' if len(missing_top) == 1 else 'them'} randomly",
                filename=_weights_file(ctx),
                location=None,
                transformers_value="random init",
                candle_value=f"cannot find tensor {missing_top[0]}",
                expect=f"cannot find tensor {first}",
            )
        if missing_layer:
            how = "panics at load (`.unwrap()` per block)" if panics else "fails at load"
            yield self.finding(
                ctx,
                f"{mod} {how}: the weights have no {backticked(missing_layer)}; transformers would initialise "
                f"{'it' if len(missing_layer) == 1 else 'them'} randomly",
                filename=_weights_file(ctx),
                location=None,
                transformers_value="random init",
                candle_value=f"{'panic: ' if panics else ''}cannot find tensor {missing_layer[0]}",
                expect=f"cannot find tensor {first}",
            )


class UnreadTensor(_WeightsRule):
    """Tensors in the checkpoint that the family's candle module never reads.

    ## What it does
    Lists tensors named like the family's weights that its candle module never asks for:
    biases candle's module has no place for (llama, mistral, granite, stablelm's `o_proj`),
    layers past `num_hidden_layers`, `lm_head.weight` where candle uses the embeddings
    (llama with tied embeddings; gemma, gemma2, gemma3 and starcoder2 always), norms its module
    lacks (stablelm-2-12b's `q_layernorm`/`k_layernorm`), stored rotary `inv_freq` buffers.
    Each group says whether transformers reads it.

    ## Why is this bad?
    When transformers reads them (biases with `attention_bias`/`mlp_bias` true, an untied
    `lm_head.weight` with `tie_word_embeddings: false`, stablelm's per-head q/k LayerNorms with
    `qk_layernorm: true`) candle computes another model without
    an error: starcoder2 with its own `lm_head` differs by 16 on the logits (portkit's generated
    starcoder2 `untied` fixture; docs/measurements.md). When
    neither reads them, the config and the weights disagree about the model, which is worth
    knowing before trusting either.

    ## Example
    A starcoder2 checkpoint with `tie_word_embeddings: false` and its own `lm_head.weight`;
    `model.layers.0.self_attn.q_proj.bias` in a llama checkpoint with `attention_bias: true`.

    ## Fix
    None in config.json.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:7 (`linear_no_bias`), :517-521 (tied
    `lm_head` reuses the embedding), :523 (layers `0..num_hidden_layers` only);
    starcoder2.rs:288 and gemma.rs:359 (`lm_head` is always `embed_tokens`); granite.rs:321-324,
    :367-369 (no biases); stable_lm.rs:212-215, :321-332 (no `q_layernorm`/`k_layernorm`).

    ## Verification
    numeric, transformers as candle computes, for the tensors transformers reads: verify runs
    transformers with the biases zeroed (a bias candle never adds computes as a zero one), with
    `tie_word_embeddings` true (the embeddings as `lm_head`, as candle's module), or without
    the norms candle's module lacks; CONFIRMED when candle agrees with it where it does not
    agree with transformers as written. Tensors neither side reads are NOT-PROBED: no number
    depends on them.

    ## References
    - https://github.com/mlc-ai/mlc-llm/issues/3494 (240 of 420 bias vectors dropped)
    - https://github.com/sbryngelson/ANEForge/issues/253
    - https://github.com/ml-explore/mlx-examples/issues/1324, https://github.com/vllm-project/vllm/issues/6758 (an
      unused `lm_head` next to tied embeddings)
    - tests/native/test_family_runners.py `test_requested_tensors_are_exactly_what_transformers_saved`
    """

    code = "PK202"
    name = "unread-tensor"
    severity = "warning"
    effect = "silent"
    fix_title = "Make config.json and the weights describe the same model"
    probe_kind = "numeric"
    not_probed = "neither side reads these tensors (transformers ignores them too): no computed number depends on them"

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not self.ready(ctx):
            return
        cand = expected_tensors(ctx)
        if cand is None:
            return
        have = self.tensors(ctx)
        tf = transformers_expected(ctx)
        n_layers = self.config(ctx).values["num_hidden_layers"]
        multipliers = ctx.family.traits.unread_multipliers if ctx.family is not None else ()
        groups: dict[str, list[str]] = defaultdict(list)
        for n in have:
            if n in cand or not is_family_name(ctx, n, cand):
                continue
            m = LAYER_RE.match(n)
            part = m.group(2) if m else n
            if m and int(m.group(1)) >= n_layers:
                groups["extra-layer"].append(n)
            elif n == "lm_head.weight":
                groups["lm-head-read" if transformers_tie(ctx) is False else "tied-lm-head"].append(n)
            elif part.endswith(".bias"):
                groups["bias-read" if self._transformers_reads_bias(ctx, n, part, tf) else "bias-unread"].append(n)
            elif (
                flag := next((f for k, f in _CONFIG_FLAG_PARTS.items() if part.startswith(k + ".")), None)
            ) and config_flag(ctx, flag) is True:
                groups[f"flag:{flag}"].append(n)
            elif part in multipliers:
                groups["multiplier"].append(n)
            else:
                groups["other"].append(n)
        mod = module_name(ctx)
        texts: dict[str, tuple[str, Severity]] = {
            "bias-read": ("transformers adds them (`attention_bias`/`mlp_bias` is true)", "error"),
            "bias-unread": (
                "transformers ignores them too (`attention_bias`/`mlp_bias` is false): the config may be wrong",
                "warning",
            ),
            "extra-layer": (f"they are past `num_hidden_layers`={n_layers}; transformers ignores them too", "warning"),
            "tied-lm-head": (
                "transformers ties it too (`tie_word_embeddings`), so both use `model.embed_tokens.weight` instead",
                "warning",
            ),
            "lm-head-read": (
                "it always uses `model.embed_tokens.weight` as `lm_head`, while transformers reads this one "
                "(`tie_word_embeddings` is false): another model",
                "error",
            ),
            "other": (
                "its module has no such tensor; transformers reads them only if its config enables them",
                "warning",
            ),
            # lint reads headers, not values: another model unless each is 1 (transformers initialises them so)
            "multiplier": ("transformers multiplies by them; candle computes as if each were 1", "warning"),
        }
        fam = ctx.family
        assert fam is not None, "ready() checks candle's view, which needs the family"
        own = fam.traits.unread_texts  # the module's own words
        for key, why in own.items():
            texts[key] = (why, texts[key][1])
        for key, names in groups.items():
            if key.startswith("flag:"):
                texts[key] = (f"transformers reads them (`{key[5:]}` is true): another model", "error")
            why, sev = texts[key]
            edit = self._as_candle(key, names)
            yield self.finding(
                ctx,
                f"{mod} never reads {len(names)} tensor{'s' if len(names) > 1 else ''} ({backticked(names)}); {why}",
                filename=_weights_file(ctx),
                location=None,
                severity=sev,
                transformers_value="read" if edit is not None else "unread",
                candle_value="unread",
                probe_kind=None if edit is not None else "static-only",
                as_candle=edit,
                # the module's own words name what transformers computes with them: not "neither side reads them"
                probe=self._own_words_probe() if edit is None and key in own else None,
            )

    def _own_words_probe(self) -> NotProbed:
        from portkit.findings import NotProbed  # loads with the first finding (`base.location`)

        return self.probe_of(NotProbed, reason=_OWN_WORDS_NOT_PROBED)

    @staticmethod
    def _as_candle(key: str, names: list[str]) -> dict[str, object] | None:
        """transformers as candle computes, for a group transformers reads (None: neither reads it)."""
        if key == "bias-read":
            return as_candle.edit("the unread biases zeroed", tensors=names)
        if key == "lm-head-read":
            return as_candle.edit("the embeddings as lm_head", config={"tie_word_embeddings": True})
        if key.startswith("flag:"):
            return as_candle.edit(f"no `{key[5:]}` (the norms candle's module lacks)", config={key[5:]: False})
        if key == "multiplier":
            return as_candle.edit("each read as 1", tensor_edits=dict.fromkeys(names, as_candle.affine(0.0, 1.0)))
        return None

    @staticmethod
    def _transformers_reads_bias(ctx: Context, name: str, part: str, tf: dict[str, tuple[int, ...]] | None) -> bool:
        if tf is not None:
            return name in tf
        # outside llama, transformers' modules follow the config's bias flags, with the class's default
        # where config.json has none (GLM-4's `attention_bias` is true)
        flag = "mlp_bias" if part.startswith("mlp.") else "attention_bias"
        ftv = ctx.ftv
        return (ftv.get(flag) if ftv is not None and flag in ftv.values else config_flag(ctx, flag)) is True


_OWN_WORDS_NOT_PROBED = (
    "transformers reads these and candle's module has no such weights: the rules its words name probe the "
    "features they belong to, and this finding adds no run of its own"
)


class UnexpectedTensor(_WeightsRule):
    """Tensor names outside the naming scheme the family's candle module looks up.

    ## What it does
    Lists tensors whose names the family's candle 0.11.0 module could never ask for: for
    llama, anything but `model.embed_tokens.weight`, `model.norm.weight`, `lm_head.weight`
    and `model.layers.N.<llama part>`; for the other families, anything outside `model.` and
    `lm_head.`, and quantized tensors (`qweight`, `scales`). Names a common prefix when
    stripping it would give names the module reads (`language_model.`).

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
    `model.layers.{i}`, `lm_head`); mistral.rs:374-385, qwen2.rs:276-286 (`vb.pp("model")`).

    ## Verification
    static-only, reported NOT-PROBED with why.

    ## References
    - https://github.com/huggingface/candle/issues/1632 (no `model.` prefix)
    - https://github.com/evilsocket/cake/issues/34 (a doubled prefix)
    - https://github.com/ggml-org/llama.cpp/issues/8134 (GPTQ's `qweight`)
    """

    code = "PK203"
    name = "unexpected-tensor"
    severity = "warning"
    effect = "load-error"
    fix_title = "Rename the tensors to the names candle's module looks up (strip the prefix) or dequantize them"
    probe_kind = "static-only"
    not_probed = (
        "a naming fact: candle never asks for these names; the load that fails on a name it needs is PK201's "
        "crash probe"
    )

    def check(self, ctx: Context) -> Iterable[Finding]:
        st = ctx.facts.safetensors
        if st is None or ctx.family is None:  # no candle module: no naming scheme to hold it to
            return
        expected = expected_tensors(ctx) or {}
        odd = [n for n in st.tensors if not is_family_name(ctx, n, expected)]
        if not odd:
            return
        hint = ""
        scheme = ctx.family.traits.name_scheme
        for n in odd:
            i = _strippable_prefix(ctx, n, expected)
            if i:
                hint = f"; stripping the prefix `{n[:i]}` gives {scheme}"
                break
            if n.endswith(QUANTIZED_SUFFIXES):
                hint = f"; these look like GPTQ/AWQ quantized tensors, which candle's {ctx.family.name} does not read"
                break
        fam = ctx.family.name
        yield self.finding(
            ctx,
            f"{len(odd)} tensor name{'s are' if len(odd) > 1 else ' is'} not one candle {ctx.target.candle}'s {fam} "
            f"looks up ({backticked(odd)}){hint}",
            filename=_weights_file(ctx),
            location=None,
        )


class LayerCountMismatch(_WeightsRule):
    """The weights hold a different number of layers than `num_hidden_layers`.

    ## What it does
    Compares the layer indices present in the weights with `num_hidden_layers`.

    ## Why is this bad?
    Fewer layers than the config: candle's `Llama::load` (and granite's) calls `.unwrap()` on
    each block, so it panics (exit 101, no `Err` to handle) at the first missing layer; the
    other families fail at load with `cannot find tensor model.layers.N...`. transformers
    initialises the missing layers randomly and runs. More layers: both silently use only
    the first `num_hidden_layers`.

    ## Example
    `num_hidden_layers: 32` with `model.layers.0` to `model.layers.27` in the weights.

    ## Fix
    None automatically: set `num_hidden_layers` to the checkpoint's layer count only if the
    checkpoint is complete.

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:523-525
    (`.map(|i| Block::load(vb.pp(format!("model.layers.{i}")), cfg).unwrap())`), granite.rs:450-452;
    mistral.rs:379-383 (`DecoderLayer::new(...)?`).

    ## Verification
    crash: candle must fail or panic (caught by the runner) naming the first missing layer.

    ## References
    - the Candle source above (`Block::load(...).unwrap()`)
    - tests/acceptance/test_verify_variants.py (the `missing-layer` fixture: CRASH-CONFIRMED)
    """

    code = "PK204"
    name = "layer-count-mismatch"
    severity = "error"
    effect = "panic"
    fix_title = "Make `num_hidden_layers` match the layers in the checkpoint"
    probe_kind = "crash"
    # the warning for layers past `num_hidden_layers`, which is static-only
    not_probed = (
        "transformers and candle both run only the first `num_hidden_layers` layers: there is nothing to "
        "crash or measure"
    )

    def check(self, ctx: Context) -> Iterable[Finding]:
        if not self.ready(ctx):
            return
        layers = weight_layers(self.tensors(ctx))
        n = self.config(ctx).values["num_hidden_layers"]
        count = max(layers) + 1 if layers else 0
        missing = sorted(set(range(n)) - layers)
        if missing:
            if self.panics(ctx):
                how = f"panics loading `model.layers.{missing[0]}` (`.unwrap()` per block)"
            else:
                how = f"fails at load with `cannot find tensor model.layers.{missing[0]}.…`"
            yield self.finding(
                ctx,
                f"`num_hidden_layers` is {n} but the weights have {len(layers)} "
                f"layer{'s' if len(layers) != 1 else ''}: "
                f"{module_name(ctx)} {how}; transformers initialises the missing layers randomly",
                keys=("num_hidden_layers",),
                transformers_value=f"{len(missing)} random layers",
                candle_value="panic" if self.panics(ctx) else "load error",
                expect=f"model.layers.{missing[0]}",
            )
        elif count > n:
            yield self.finding(
                ctx,
                f"`num_hidden_layers` is {n} but the weights have {count} layers: transformers and {module_name(ctx)} "
                f"both run only the first {n}",
                keys=("num_hidden_layers",),
                severity="warning",
                transformers_value=n,
                candle_value=n,
                probe_kind="static-only",  # both sides run the same layers: nothing to crash or measure
            )


class LmHeadVsTie(_WeightsRule):
    """The module's way of building `lm_head` and the checkpoint's `lm_head.weight` disagree.

    ## What it does
    Applies each candle module's own `lm_head` logic to the checkpoint:
    - llama, qwen3, qwen3_moe, phi3, olmo2 read `lm_head.weight` unless `tie_word_embeddings`
      is true: flags a checkpoint without it when the flag is false or absent;
    - mistral, mixtral, stable_lm, granite always read `lm_head.weight`, whatever the flag:
      flags a tied checkpoint (no `lm_head.weight`);
    - qwen2 reads `lm_head.weight` whenever the file has it and never looks at the flag:
      flags a file whose `lm_head.weight` contradicts `tie_word_embeddings` (a warning);
    - gemma, gemma2, gemma3 and starcoder2 always use the embeddings (a stored
      `lm_head.weight` they never read is PK202).

    ## Why is this bad?
    A missing `lm_head.weight` fails at load (`cannot find tensor lm_head.weight`): every
    granite-3.x checkpoint and a tied Mistral. With the flag false transformers runs with a
    randomly initialised `lm_head`, so its logits are garbage too
    (https://github.com/huggingface/transformers/issues/43429). In
    qwen2 the contradiction is silent: candle uses the stored head where transformers ties it
    to the embeddings, or ties where transformers would initialise a head.

    ## Example
    granite config with `tie_word_embeddings: true` and no `lm_head.weight` in the weights.

    ## Fix
    None automatically: set `tie_word_embeddings: true` if the model ties its embeddings
    (llama, qwen3, phi3, olmo2), else restore `lm_head.weight` (for mistral, mixtral,
    stable_lm and granite, a copy of `model.embed_tokens.weight`).

    ## Candle source
    candle-transformers-0.11.0/src/models/llama.rs:82 (`unwrap_or(false)`), :517-521;
    qwen3.rs:500-504, phi3.rs:371-375, olmo2.rs:290-294 (the flag); mistral.rs:385,
    mixtral.rs:426, stable_lm.rs:383, granite.rs:448 (always `lm_head`); qwen2.rs:380-384
    (`vb.contains_tensor("lm_head.weight")`).

    ## Verification
    crash: candle must fail with `cannot find tensor lm_head.weight` (qwen2's silent case:
    numeric, transformers run with the head candle uses).

    ## References
    - https://github.com/huggingface/candle/issues/2516 (`cannot find tensor lm_head.weight`, Llama-3.2-3B)
    - https://github.com/huggingface/candle/issues/2443 (qwen2 looked for `lm_head`, not `lm_head.weight`)
    - https://github.com/ruvnet/RuVector/issues/645, https://github.com/ruvnet/RuVector/issues/646,
      https://github.com/evilsocket/cake/issues/38, https://github.com/huggingface/text-generation-inference/issues/2918
    - https://github.com/huggingface/transformers/issues/43429 (an untied head left random: gibberish)
    - tests/acceptance/test_verify_families.py (mistral, granite and stable_lm `tied`: CRASH-CONFIRMED)
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
        have = self.tensors(ctx)
        expected = expected_tensors(ctx)
        if expected is None:
            return
        fam, mod, tie = ctx.family, module_name(ctx), transformers_tie(ctx)
        assert fam is not None
        if fam.traits.lm_head == "probed":
            yield from self._probed(ctx, "lm_head.weight" in have, tie)
            return
        if "lm_head.weight" not in expected or "lm_head.weight" in have:
            return
        if "tie_word_embeddings" in self.config(ctx).values:  # the module follows the flag
            if config_flag(ctx, "tie_word_embeddings") is False:
                written = "is false"
            else:
                written = "is absent (false in both)" if tie is False else "is absent (candle's default: false)"
            tf = "transformers initialises `lm_head` randomly" if tie is False else "transformers ties it (its default)"
            yield self._missing(
                ctx,
                f"`tie_word_embeddings` {written} and the weights have no `lm_head.weight`: "
                f"{fam.who} fails at load with `cannot find tensor lm_head.weight`; {tf}",
            )
        else:
            tf = "transformers ties it to the embeddings" if tie is True else "transformers initialises it randomly"
            yield self._missing(
                ctx,
                f"{mod} always reads `lm_head.weight`, whatever `tie_word_embeddings` says, and "
                f"the weights have none: it fails at load with `cannot find tensor lm_head.weight`; {tf}",
                help="Save `lm_head.weight` in the checkpoint (a copy of `model.embed_tokens.weight` when "
                f"the model ties them): {mod} reads no flag",
            )

    def _missing(self, ctx: Context, message: str, help: str | None = None) -> Finding:
        return self.finding(
            ctx,
            message,
            help=help,
            keys=("tie_word_embeddings",),
            transformers_value="tied lm_head" if transformers_tie(ctx) is True else "random lm_head",
            candle_value="cannot find tensor lm_head.weight",
            expect="cannot find tensor lm_head.weight",
        )

    def _probed(self, ctx: Context, present: bool, tie: object) -> Iterable[Finding]:
        """A module that probes the file for `lm_head.weight` and never reads the flag (qwen2)."""
        mod = module_name(ctx)
        if present and tie is True:
            msg = (
                f"`tie_word_embeddings` is true but the weights hold an `lm_head.weight`: {mod} uses it "
                "(it probes the file, never the flag), transformers uses the embeddings"
            )
        elif not present and tie is False:
            msg = (
                f"`tie_word_embeddings` is false and the weights have no `lm_head.weight`: {mod} silently uses "
                "the embeddings, transformers initialises `lm_head` randomly"
            )
        else:
            return
        yield self.finding(
            ctx,
            msg,
            keys=("tie_word_embeddings",),
            severity="warning",
            transformers_value="embeddings" if tie is True else "random lm_head",
            candle_value="lm_head.weight" if present else "embeddings",
            probe_kind="numeric",  # nothing crashes: transformers run with candle's head shows the effect
            as_candle=as_candle.edit(
                "the stored lm_head" if present else "the embeddings as lm_head",
                config={"tie_word_embeddings": not present},
            ),
        )


class TensorShapeMismatch(_WeightsRule):
    """A tensor's shape is not the one candle derives from config.json.

    ## What it does
    Compares every tensor the family's candle module reads with the shape it computes from
    the config (`(hidden/heads) * kv_heads` rows for k/v where the module derives `head_dim`,
    fused `qkv_proj` rows in phi3, and so on), and for llama says whether transformers'
    expected shape matches the file.

    ## Why is this bad?
    candle's VarBuilder refuses the tensor (`shape mismatch for ...`): an error, or a panic
    for layer tensors in llama and granite (their per-block `.unwrap()`). When
    transformers expects the file's shape (a `head_dim` key, GQA heads), the checkpoint is
    fine and candle's reading of the config is the problem; when neither does, the config
    and the weights disagree.

    ## Example
    `num_key_value_heads` absent (candle: 32 kv heads) with `k_proj` of 1024 rows (8 heads).

    ## Fix
    None automatically.

    ## Candle source
    candle-nn-0.11.0/src/var_builder.rs:501-520 (`shape mismatch for {name}`);
    candle-transformers-0.11.0/src/models/llama.rs:362-371, :410-416, :516-522;
    phi3.rs:184-187 (fused qkv), olmo2.rs:132-133 (`q_norm` over hidden_size).

    ## Verification
    crash: candle must fail with `shape mismatch for` the first mismatching tensor.

    ## References
    - https://github.com/huggingface/candle/issues/3917 (shapes from `head_dim`)
    - https://github.com/meta-llama/llama/issues/427 (GQA k/v shapes: `[4096, 4096]` vs `[128, 4096]`)
    - https://github.com/ggml-org/llama.cpp/issues/2376
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
        have = self.tensors(ctx)
        expected = expected_tensors(ctx)
        if expected is None:
            return
        tf = transformers_expected(ctx)
        panics = self.panics(ctx)
        groups: dict[tuple[str, tuple[int, ...], tuple[int, ...]], list[str]] = defaultdict(list)
        first: str | None = None  # candle stops at the first mismatch in load order
        for n, shape in expected.items():
            t = have.get(n)
            if t is not None and t.shape != shape:
                groups[(_pattern(n), shape, t.shape)].append(n)
                first = first or n
        for (pat, want, got), names in groups.items():
            if tf is None:  # without transformers' table the file's shapes are what transformers' module wrote
                side = "the config and the checkpoint disagree, or candle derives the size differently"
            elif all(tf.get(n) == got for n in names):
                side = "transformers expects the file's shape"
            else:
                side = "transformers does not expect it either"
            where = f" in {len(names)} layers" if len(names) > 1 else ""
            how = "panics at load (`.unwrap()` per block)" if panics and LAYER_RE.match(names[0]) else "fails at load"
            yield self.finding(
                ctx,
                f"`{pat}` is {list(got)}{where}; {module_name(ctx)} expects {list(want)} from config.json and {how}; "
                f"{side}",
                filename=str(have[names[0]].file),
                location=None,
                transformers_value=(list(tf.get(names[0], ())) or None) if tf is not None else list(got),
                candle_value=list(want),
                expect=f"shape mismatch for {first}",
            )


class UnsupportedTensorDtype(_WeightsRule):
    """A safetensors dtype candle cannot load into a model.

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
    - https://github.com/huggingface/candle/issues/594, https://github.com/huggingface/candle/issues/3503 (dtype support
      on the CPU)
    """

    code = "PK207"
    name = "unsupported-tensor-dtype"
    severity = "error"
    effect = "load-error"
    fix_title = "Convert the weights to F32, F16 or BF16"
    probe_kind = "crash"

    def check(self, ctx: Context) -> Iterable[Finding]:
        st = ctx.facts.safetensors  # candle-core refuses these dtypes whatever the module (or no config)
        if st is None:
            return
        bad: dict[str, list[str]] = defaultdict(list)
        for n, t in st.tensors.items():
            if t.dtype in UNSUPPORTED_DTYPES or t.dtype in DUMMY_DTYPES:
                bad[t.dtype].append(n)
        for dt, names in bad.items():
            how = (
                f"`unsupported safetensor dtype {dt}`"
                if dt in UNSUPPORTED_DTYPES
                else "an opaque MX type it cannot convert"
            )
            yield self.finding(
                ctx,
                f"{len(names)} tensor{'s are' if len(names) > 1 else ' is'} {dt} ({backticked(names)}); candle "
                f"{ctx.target.candle} fails at load with {how}",
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
