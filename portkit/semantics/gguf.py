"""What candle 0.11.0's `models::quantized_llama::ModelWeights::from_gguf` reads from a GGUF.

Source: candle-transformers-0.11.0/src/models/quantized_llama.rs
- :27 `MAX_SEQ_LEN = 4096`: the cos/sin table has 4096 rows whatever the metadata says.
- :372-394: metadata, always under the `llama.` prefix; `to_u32()` / `to_f32()` are strict
  (candle-core-0.11.0/src/quantized/gguf_file.rs:250-289: a U64 or I32 count is refused;
  an F64 `freq_base` fails `to_f32()` and `.unwrap_or(10000)` silently uses 10000).
- :400-428: RoPE pairing from `general.architecture`: a fixed list gets `rope` (NEOX),
  everything else `rope_i` (interleaved).
- :433-512: tensors `token_embd.weight`, `output_norm.weight`, optional `output.weight`
  (falls back to the embedding), then `blk.{i}.*` for i < block_count; head_dim is
  `embedding_length / head_count` (:502), never `attention.key_length`.
- candle-core-0.11.0/src/quantized/mod.rs:300-321: the ggml types candle parses;
  ggml_file.rs:153-188: Q8_1 and Q8_K parse but cannot be loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Literal

    from portkit.model.gguf_header import GgufFile, GgufValue


MAX_SEQ_LEN = 4096
DEFAULT_FREQ_BASE = 10000.0
REQUIRED_U32 = (
    "llama.attention.head_count",
    "llama.attention.head_count_kv",
    "llama.block_count",
    "llama.embedding_length",
    "llama.rope.dimension_count",
)
REQUIRED_F32 = ("llama.attention.layer_norm_rms_epsilon",)
REQUIRED_KEYS = REQUIRED_U32 + REQUIRED_F32
# quantized_llama.rs:406-428
CANDLE_NEOX_ARCHS = frozenset(
    "qwen qwen2 qwen2moe qwen3 qwen3moe falcon grok dbrx phi2 phi3 phimoe stablelm starcoder2 "
    "bert nomic-bert jina-bert-v2 olmo2 olmoe codeshell plamo".split()
)
# llama.cpp `llama_model_rope_type()` (src/llama-model.cpp): architectures it runs with NEOX
# (or MROPE) pairing that candle's list misses, so candle pairs them interleaved.
LLAMA_CPP_NEOX_NOT_IN_CANDLE = frozenset(
    "bitnet gemma gemma2 gemma3 openelm gptneox nemotron exaone minicpm3 qwen2vl".split()
)
# candle-core quantized/mod.rs:300-321 (parse) and ggml_file.rs:153-188 (load)
CANDLE_PARSES = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30}
CANDLE_LOADS = CANDLE_PARSES - {9, 15}
LAYER_TENSORS = (
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "ffn_gate.weight",
    "ffn_down.weight",
    "ffn_up.weight",
    "attn_norm.weight",
    "ffn_norm.weight",
)


def candle_debug(v: GgufValue) -> str:
    """candle's `{v:?}` of a metadata Value, e.g. `U64(32)`, `String("x")`."""
    names = {"STRING": "String", "BOOL": "Bool", "ARRAY": "Array"}
    t = names.get(v.type, v.type)
    if v.type == "STRING":
        return f'String("{v.value}")'
    if v.type == "BOOL":
        return f"Bool({str(v.value).lower()})"
    if v.type == "ARRAY":
        return "Array([...])"
    return f"{t}({v.value})"


@dataclass(frozen=True, slots=True, kw_only=True)
class GgufView:
    """candle 0.11.0 quantized_llama's effective values for one GGUF file."""

    refused: str | None = None  # candle's first load error, if any
    missing_keys: list[str] = field(default_factory=list)  # required keys absent
    wrong_type_keys: dict[str, str] = field(default_factory=dict)  # key -> candle's error text
    architecture: str = ""
    rope_is_neox: bool = False
    head_count: int | None = None
    head_count_kv: int | None = None
    block_count: int | None = None
    embedding_length: int | None = None
    rope_dim: int | None = None
    rms_eps: float | None = None
    head_dim: int | None = None
    freq_base: float = DEFAULT_FREQ_BASE
    freq_base_source: Literal["metadata", "default", "default-wrong-type"] = "default"
    freq_base_written: str | None = None  # e.g. "F64(500000.0)" when the type is wrong
    context_length: int | None = None
    key_length: int | None = None
    value_length: int | None = None
    has_rope_freqs: bool = False
    max_seq_len: int = MAX_SEQ_LEN


def _u32(v: GgufValue) -> int | None:
    return v.value if v.type == "U32" else None


def gguf_view(g: GgufFile) -> GgufView:
    md = g.metadata
    refused: str | None = None
    for t in g.tensors.values():
        if t.type_id not in CANDLE_PARSES:
            refused = f"unknown dtype for tensor {t.type_id}"
            break
    missing: list[str] = []
    wrong: dict[str, str] = {}
    vals: dict[str, int | float | None] = {}
    for key in REQUIRED_KEYS:
        v = md.get(key)
        if v is None:
            missing.append(key)
            err = f"cannot find {key} in metadata"
            vals[key] = None
        else:
            want = "U32" if key in REQUIRED_U32 else "F32"
            if v.type != want:
                err = f"not a {want.lower()} {candle_debug(v)}"
                wrong[key] = err
                vals[key] = None
            else:
                err = None
                vals[key] = v.value
        if err and refused is None:
            refused = err
    fb = md.get("llama.rope.freq_base")
    if fb is None:
        freq_base, fb_src, fb_written = DEFAULT_FREQ_BASE, "default", None
    elif fb.type != "F32":
        freq_base, fb_src, fb_written = DEFAULT_FREQ_BASE, "default-wrong-type", candle_debug(fb)
    else:
        freq_base, fb_src, fb_written = float(fb.value), "metadata", None
    arch_v = md.get("general.architecture")
    arch = arch_v.value if arch_v is not None and arch_v.type == "STRING" and arch_v.value is not None else ""
    hc = vals["llama.attention.head_count"]
    emb = vals["llama.embedding_length"]
    head_dim = emb // hc if isinstance(emb, int) and isinstance(hc, int) and hc else None
    if refused is None and hc == 0:
        refused = "attempt to divide by zero (llama.attention.head_count is 0)"
    bc = vals["llama.block_count"]
    if refused is None:
        needed = ["token_embd.weight", "output_norm.weight"]
        if isinstance(bc, int):
            needed += [f"blk.{i}.{n}" for i in range(min(bc, 100_000)) for n in LAYER_TENSORS]
        for n in needed:
            t = g.tensors.get(n)
            if t is None:
                refused = f"cannot find tensor info for {n}"
                break
            if t.type_id not in CANDLE_LOADS:
                refused = f"quantized type {t.type_name.replace('_K', 'K')} is not supported yet"
                break
    ctx = md.get("llama.context_length")
    kl = md.get("llama.attention.key_length")
    vl = md.get("llama.attention.value_length")

    def num(v: GgufValue | None) -> int | None:
        if v is None or v.type not in ("U8", "U16", "U32", "U64", "I8", "I16", "I32", "I64"):
            return None
        return int(v.value)

    return GgufView(
        refused=refused,
        missing_keys=missing,
        wrong_type_keys=wrong,
        architecture=arch,
        rope_is_neox=arch in CANDLE_NEOX_ARCHS,
        head_count=hc if isinstance(hc, int) else None,
        head_count_kv=vals["llama.attention.head_count_kv"],  # type: ignore[arg-type]
        block_count=bc if isinstance(bc, int) else None,
        embedding_length=emb if isinstance(emb, int) else None,
        rope_dim=vals["llama.rope.dimension_count"],  # type: ignore[arg-type]
        rms_eps=vals["llama.attention.layer_norm_rms_epsilon"],
        head_dim=head_dim,
        freq_base=freq_base,
        freq_base_source=fb_src,
        freq_base_written=fb_written,
        context_length=num(ctx),
        key_length=num(kl),
        value_length=num(vl),
        has_rope_freqs="rope_freqs.weight" in g.tensors,
    )
