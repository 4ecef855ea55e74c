"""`FamilyView`: what one candle 0.11.0 module makes of a config.json.

Each family module (`portkit.families.<name>`) declares `FIELDS`, the exact serde mirror of the
struct candle's example deserializes (field order, types, defaults), and `effective(parsed)`,
the values the module then computes with (derived `head_dim`, `into_config` for llama and granite).
`FamilyView.values` is, key for key, what `portkit_native.candle_config(text, family=name)`
returns: the native oracle test holds the two together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from portkit.semantics import serde
from portkit.semantics.serde import Pairs, SerdeError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

    from portkit.families import Family


@dataclass(frozen=True, slots=True, kw_only=True)
class FamilyView:
    family: str
    refused: str | None = None  # serde_json's message, without ` at line L column C`
    refused_at: list[str] | None = None  # key path of the value serde failed on
    values: dict[str, Any] = field(default_factory=dict)  # == portkit_native.candle_config(text, family)
    written: frozenset[str] = frozenset()  # top-level keys config.json writes (candle read them, not a default)

    @property
    def ok(self) -> bool:
        return self.refused is None

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def missing_field(self) -> str | None:
        """The field of a ``missing field `X` `` refusal, else None."""
        r = self.refused or ""
        if r.startswith("missing field `") and not self.refused_at:
            return r[len("missing field `") : -1]
        return None


_DESERIALIZERS: dict[tuple[str, int], Any] = {}


def family_view(family: Family, config: str | Any) -> FamilyView:
    mod = family.semantics
    fields = family.fields
    de = _DESERIALIZERS.get((family.name, id(fields)))
    if de is None:  # built once per family and release's fields: lint reads many configs of one family
        de = _DESERIALIZERS[(family.name, id(fields))] = serde.de_struct(family.config_struct, fields)
    try:
        value = serde.loads(config) if isinstance(config, str) else serde.to_pairs(config)
        parsed = de(value)
    except SerdeError as e:
        return FamilyView(family=family.name, refused=str(e), refused_at=e.path)
    written = frozenset(k for k, _ in value) if isinstance(value, Pairs) else frozenset()
    return FamilyView(family=family.name, values=mod.effective(parsed), written=written)
