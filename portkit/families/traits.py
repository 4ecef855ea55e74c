"""The traits of a family module that say where candle 0.11.0 breaks on a chat's paths, as records.

A family module sets `CONTINUATION_MASK`, `BATCH_MASK` or `PADDING_MASK` (read through
`Family.trait`, None in every module that does not) to one of these frozen records: what kind of
break it is and the candle source that shows it. The path rules (`portkit.rules.runtime_paths`)
read the fields by name, and each rule's `families` is `FamiliesWith(trait, kind)`: the families
whose module sets that trait to that kind, derived from the modules rather than listed again.
"""

from __future__ import annotations

from dataclasses import dataclass

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterator
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
    only whether a module sets it: `family.trait("PADDING_MASK") is not None` means the module has
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
        value = family.trait(self.trait) if family is not None else None
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
