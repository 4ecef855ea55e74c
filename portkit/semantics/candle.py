"""What candle 0.11.0's `models::llama` makes of a config.json.

`LlamaConfig` is `#[derive(serde::Deserialize)]` with 13 fields and no
`deny_unknown_fields` (candle-transformers-0.11.0/src/models/llama.rs:38-54);
`into_config(false)` fills `num_key_value_heads` (default: heads) and `tie_word_embeddings`
(default false) (llama.rs:56-85); `rope_theta` has a serde default of 10000 that applies only
when the key is absent (llama.rs:47,62-64); head_dim is always hidden_size / heads
(llama.rs:156,366-367,379). `candle_view()` mirrors that parse exactly; its
`native_dict()` is field for field what `portkit_native.candle_config()` returns, and the
native oracle test holds the two together.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from portkit.semantics import serde
from portkit.semantics.serde import Field, Pairs, SerdeError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any, Literal, Mapping

CANDLE_VERSION = "0.11.0"
DEFAULT_ROPE_THETA = 10000.0

_de_rope_type = serde.de_enum(("llama3", "default"))
_de_llama3 = serde.de_struct(
    "Llama3RopeConfig",
    (
        Field("factor", serde.de_f32),
        Field("low_freq_factor", serde.de_f32),
        Field("high_freq_factor", serde.de_f32),
        Field("original_max_position_embeddings", serde.de_usize),
        Field("rope_type", _de_rope_type),
    ),
)
_de_eos = serde.de_untagged("LlamaEosToks", serde.de_u32, serde.de_vec(serde.de_u32))

LLAMA_CONFIG_FIELDS = (
    Field("hidden_size", serde.de_usize),
    Field("intermediate_size", serde.de_usize),
    Field("vocab_size", serde.de_usize),
    Field("num_hidden_layers", serde.de_usize),
    Field("num_attention_heads", serde.de_usize),
    Field("num_key_value_heads", serde.de_option(serde.de_usize), None),
    Field("rms_norm_eps", serde.de_f64),
    Field("rope_theta", serde.de_f32, DEFAULT_ROPE_THETA),
    Field("bos_token_id", serde.de_option(serde.de_u32), None),
    Field("eos_token_id", serde.de_option(_de_eos), None),
    Field("rope_scaling", serde.de_option(_de_llama3), None),
    Field("max_position_embeddings", serde.de_usize),
    Field("tie_word_embeddings", serde.de_option(serde.de_bool), None),
)
REQUIRED_FIELDS = tuple(f.name for f in LLAMA_CONFIG_FIELDS if f.default is serde.MISSING)
OPTIONAL_FIELDS = tuple(f.name for f in LLAMA_CONFIG_FIELDS if f.default is not serde.MISSING)
_de_llama_config = serde.de_struct("LlamaConfig", LLAMA_CONFIG_FIELDS)


@dataclass(frozen=True, slots=True, kw_only=True)
class CandleRopeScaling:
    """candle's `Llama3RopeConfig` (llama.rs:23-30) as parsed."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int
    rope_type: Literal["llama3", "default"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CandleView:
    """candle 0.11.0 llama's effective values for one config.json (after `into_config(false)`).

    `refused` is serde_json's message when candle refuses the config at load; every other
    field is then None.
    """

    refused: str | None = None
    refused_at: list[str] | None = None  # key path of the value serde failed on ([] = the object itself)
    hidden_size: int | None = None
    intermediate_size: int | None = None
    vocab_size: int | None = None
    num_hidden_layers: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None  # hidden_size // num_attention_heads; None when heads == 0 (candle divides by zero)
    rms_norm_eps: float | None = None
    rope_theta: float | None = None  # an f32, widened
    rope_theta_source: Literal["top-level", "default"] | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    rope_scaling: CandleRopeScaling | None = None
    rope_scaling_applied: bool = False  # llama3 type only: `default` computes unscaled frequencies (llama.rs:166-171)
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool | None = None
    use_flash_attn: bool = False

    @property
    def ok(self) -> bool:
        return self.refused is None

    def native_dict(self) -> dict[str, Any]:
        """The same dict `portkit_native.candle_config()` returns (it raises when refused)."""
        if self.refused is not None:
            raise ValueError(f"candle refuses this config: {self.refused}")
        d = dataclasses.asdict(self)
        for k in ("refused", "refused_at", "rope_theta_source", "rope_scaling_applied"):
            del d[k]
        # serde_json writes a non-finite f32 as null
        for k in ("rope_theta", "rms_norm_eps"):
            v = d[k]
            if v is not None and (v != v or v in (float("inf"), float("-inf"))):
                d[k] = None
        if d["rope_scaling"] is not None:
            for k in ("factor", "low_freq_factor", "high_freq_factor"):
                v = d["rope_scaling"][k]
                if v != v or v in (float("inf"), float("-inf")):
                    d["rope_scaling"][k] = None
        return d


def candle_view(config: str | Mapping[str, Any] | Any) -> CandleView:
    """candle's effective values for `config` (the raw JSON text, or parsed JSON).

    Pass the text when you have it: only the text keeps duplicate keys and number literals
    exactly as serde_json sees them.
    """
    try:
        value = serde.loads(config) if isinstance(config, str) else serde.to_pairs(config)
        cfg = _de_llama_config(value)
    except SerdeError as e:
        return CandleView(refused=str(e), refused_at=e.path)
    heads = cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"]
    rs = cfg["rope_scaling"]
    return CandleView(
        hidden_size=cfg["hidden_size"],
        intermediate_size=cfg["intermediate_size"],
        vocab_size=cfg["vocab_size"],
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=heads if kv is None else kv,
        head_dim=cfg["hidden_size"] // heads if heads else None,
        rms_norm_eps=cfg["rms_norm_eps"],
        rope_theta=cfg["rope_theta"],
        rope_theta_source="top-level" if _has_key(value, "rope_theta") else "default",
        bos_token_id=cfg["bos_token_id"],
        eos_token_id=cfg["eos_token_id"],
        rope_scaling=CandleRopeScaling(**rs) if rs is not None else None,
        rope_scaling_applied=rs is not None and rs["rope_type"] == "llama3",
        max_position_embeddings=cfg["max_position_embeddings"],
        tie_word_embeddings=bool(cfg["tie_word_embeddings"]) if cfg["tie_word_embeddings"] is not None else False,
        use_flash_attn=False,
    )


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, Pairs):
        return any(k == key for k, _ in value)
    if isinstance(value, list):  # a positional struct: every field is present
        return True
    return False
