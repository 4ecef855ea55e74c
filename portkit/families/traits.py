"""The traits of a family module that say where candle 0.11.0 breaks on a chat's paths, as records.

A family module sets `CONTINUATION_MASK`, `BATCH_MASK` or `PADDING_MASK` (read through
`Family.trait`, None in every module that does not) to one of these frozen records: what kind of
break it is and the candle source that shows it. The path rules (`portkit.rules.runtime_paths`)
read the fields by name, and each rule's `families` is `FamiliesWith(trait, kind)`: the families
whose module sets that trait to that kind, derived from the modules rather than listed again.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields

from portkit.families import sublayers as _sublayers

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any, Literal

    from portkit.families import Family


@dataclass(frozen=True, slots=True)
class ContinuationMask:
    """How the module's mask breaks on a continuation (a later turn fed many tokens at once at an
    offset on the warm KV cache).

    "prefix-in-model-dtype": the cached keys' columns are zeros of the model's dtype, concatenated
    with an f32 triangle (only f32 runs); "rotating-window": the sliding layers' RotatingKvCache
    hands back at most `sliding_window` keys while the mask has offset + seq_len columns."""

    kind: Literal["prefix-in-model-dtype", "rotating-window"]
    source: str  # the candle source a message cites: "qwen2.rs:316-318"


@dataclass(frozen=True, slots=True)
class BatchMask:
    """How the module's mask breaks on a batch (N > 1 rows in one forward).

    "undersized": one row's mask buffer shaped for N rows (`Tensor::from_slice` does not check the
    length); `built` "where-read" (only on the path that reads it) or "always" (every multi-token
    forward casts it to the model dtype, read or not); `read` "off-cpu" (qwen3's attention adds it
    off the CPU, or on it with flash-attn) or "every-device" (smollm3 adds it everywhere: on the
    CPU the read panics past the buffer)."""

    kind: Literal["undersized"]
    source: str
    built: Literal["where-read", "always"]
    read: Literal["off-cpu", "every-device"] = "off-cpu"


@dataclass(frozen=True, slots=True)
class PaddingMask:
    """The module's public forward that takes a padding mask, and how it breaks.

    "bidirectional": the mask it builds from the padding mask has no causal triangle. (verify asks
    only whether a module sets it: `family.traits.padding_mask is not None` means the module has
    such a forward.)"""

    kind: Literal["bidirectional"]
    source: str


@dataclass(frozen=True, slots=True)
class Changed:
    """A trait whose value a candle release changed: `before` in the releases before `since`, `after`
    from it on (`Family.trait` resolves it for the family's bound release). `by` says what changed."""

    since: str
    by: str
    before: Any
    after: Any

    def at(self, release: str) -> Any:
        from portkit.candle_release import key

        return self.after if key(release) >= key(self.since) else self.before


@dataclass(frozen=True, slots=True, kw_only=True)
class Traits:
    """What the shared rules need to know about one family's module beyond its config mirror, for
    the bound release (`Family.traits`). A family module sets a trait as an upper-case constant
    (`LM_HEAD = "always-tied"`; a `Changed` where a release changed it); every trait it does not
    set has the default below, the value of a module that does nothing special there."""

    #: how messages name the module ({release}, {name} filled in); None: "candle {release}'s `{name}`"
    candle_name: str | None = None
    f32_fields: frozenset[str] = frozenset()  # fields serde reads as f32: transformers' value is compared in f32
    theta_keys: tuple[str, ...] = ("rope_theta",)  # the keys that hold a rope base
    load_panics: str | None = None  # the load function that `.unwrap()`s each block (a bad layer tensor panics)
    query_proj: str = "q_proj"  # the projection whose rows hold the query heads
    name_scheme: str = "names it reads"  # PK203's words for the tensor names the module looks up
    #: (top-level names, layer parts) when the module looks up a fixed list
    known_tensor_names: tuple[frozenset[str], frozenset[str]] | None = None
    candle_rope_scaling: str | None = None  # the one rope scaling type the module computes as transformers does
    rope_keys_shown: tuple[str, ...] | None = None  # the rope parameters a PK102 message lists; None: all of them
    unread_texts: Mapping[str, str] = field(
        default_factory=dict
    )  # PK202's reasons, where the module's own words differ
    #: layer parts transformers multiplies by that the module never reads, so computes as 1 (gemma4's
    #: `layer_scalar`): PK202 runs transformers with each read as 1
    unread_multipliers: tuple[str, ...] = ()
    #: how the module builds lm_head: "flag" (`lm_head.weight` unless `tie_word_embeddings`),
    #: "always-loaded", "always-tied" (`embed_tokens`), "probed" (when the file has one, never the flag)
    lm_head: Literal["flag", "always-loaded", "always-tied", "probed"] = "flag"
    #: how the module windows attention: None (never), "every-layer" (candle's prefill mask keeps
    #: `sliding_window`+1 keys on every layer, decode keeps all), "pattern" (gemma3: its sliding
    #: layers, decode through a RotatingKvCache of `sliding_window`), "layer-types" (gemma4: the same on
    #: the layers `layer_types` names sliding), "unsupported" (build fails)
    sliding_window: Literal["every-layer", "pattern", "layer-types", "unsupported"] | None = None
    #: where the module builds its RoPE cos/sin table in the model dtype (positions, inv_freq and their
    #: product rounded to it: PK317), as candle source lines; None: built in f32 and then cast
    rope_table_in_model_dtype: str | None = None
    activation_keys: tuple[str, ...] = ("hidden_act",)  # the key(s) candle reads the activation from (two: either one)
    transformers_activation_key: str = "hidden_act"  # the one transformers reads
    #: where the module breaks on a chat's paths (None: it does not): a later turn fed at an offset
    #: on the warm KV cache, a batch of N > 1 rows, and its public forward that takes a padding mask
    continuation_mask: ContinuationMask | None = None
    batch_mask: BatchMask | None = None
    padding_mask: PaddingMask | None = None
    #: the submodules of transformers' decoder layer the porting kit records, in computation order
    #: (`portkit.families.sublayers`): Llama's decoder layer unless the module says otherwise
    sublayers: tuple[str, ...] = _sublayers.DEFAULT
    #: transformers' `use_bidirectional_attention` value that makes its model attend both ways, and the
    #: config.json edit that keeps it causal, as candle's module always is (PK122); None: no such switch
    bidirectional: tuple[Any, Mapping[str, Any]] | None = None

    @classmethod
    def of(cls, module: Any, release: str) -> Traits:
        """The traits `module` (a family's `portkit.families.<name>`) sets, as `release` has them."""
        values = {}
        for f in fields(cls):
            value = getattr(module, f.name.upper(), MISSING)
            if value is MISSING:
                continue
            values[f.name] = value.at(release) if isinstance(value, Changed) else value
        return cls(**values)


class FamiliesWith:
    """The families whose module sets the trait `trait` to a record of kind `kind`, in registry
    order: a rule's `families`, derived from the family modules.

    It reads as the tuple of names a hand-written `families` is (`in`, iteration, `len`,
    indexing, equality with a tuple). `name in it` reads that one family's trait, so linting a
    config imports its own family's module only; iterating reads every family's."""

    __slots__ = ("trait", "kind", "_names")

    def __init__(self, trait: str, kind: str) -> None:
        self.trait = trait
        self.kind = kind
        self._names: tuple[str, ...] | None = None

    def of(self, family: Family | None) -> Any:
        """The family's record of this trait when it is of this kind, else None."""
        value = getattr(family.traits, self.trait.lower()) if family is not None else None
        return value if value is not None and value.kind == self.kind else None

    @property
    def names(self) -> tuple[str, ...]:
        if self._names is None:
            from portkit.families import FAMILIES

            self._names = tuple(f.name for f in FAMILIES if self.of(f) is not None)
        return self._names

    def __contains__(self, name: object) -> bool:
        from portkit.families import BY_NAME

        family = BY_NAME.get(name) if isinstance(name, str) else None
        return family is not None and self.of(family) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __getitem__(self, i: int) -> str:
        return self.names[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FamiliesWith):
            return self.names == other.names
        return isinstance(other, tuple) and self.names == other

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        return f"FamiliesWith({self.trait!r}, {self.kind!r}) = {self.names!r}"


__all__ = ["BatchMask", "ContinuationMask", "FamiliesWith", "PaddingMask"]
