"""What candle 0.11.0's GGUF loaders read from a GGUF.

A GGUF goes to the loader `GGUF_LOADERS` names for its
`general.architecture`; an architecture with no loader of its own can only be tried with
`quantized_llama`, which reads `llama.*` keys whatever the architecture says. `GgufView` is
quantized_llama's reading; `LOADER_REQUIRED` and `loader_required_tensors` hold what the other
loaders (quantized_qwen2, quantized_qwen3, quantized_gemma3, quantized_phi3, quantized_phi,
quantized_glm4, quantized_smollm3) require.

quantized_llama: candle-transformers-0.11.0/src/models/quantized_llama.rs
- :27 `MAX_SEQ_LEN = 4096`: the cos/sin table has 4096 rows whatever the metadata says.
- :372-394: metadata, always under the `llama.` prefix; `to_u32()` / `to_f32()` are strict
  (candle-core-0.11.0/src/quantized/gguf_file.rs:250-289: a U64 or I32 count is refused;
  an F64 `freq_base` fails `to_f32()` and `.unwrap_or(10000)` silently uses 10000).
- :400-428: RoPE pairing from `general.architecture`: a fixed list gets `rope` (NEOX),
  everything else `rope_i` (interleaved).
- :433-512: tensors `token_embd.weight`, `output_norm.weight`, optional `output.weight`
  (falls back to the embedding), then `blk.{i}.*` for i < block_count; head_dim is
  `embedding_length / head_count` (:502), never `attention.key_length`. With
  `llama.expert_count` > 1 (:378-380) each block reads `ffn_gate_inp` and per-expert
  `ffn_{gate,down,up}.{e}.weight` (:459-479), never llama.cpp's merged `*_exps` tensors.
- candle-core-0.11.0/src/quantized/mod.rs:300-321: the ggml types candle parses;
  ggml_file.rs:153-188: Q8_1 and Q8_K parse but cannot be loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from portkit.candle_modules import ADDED
from portkit.candle_release import NATIVE, Span
from portkit.candle_release import key as release_key

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Literal

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
#: quantized_llama pairs CANDLE_NEOX_ARCHS NEOX from 0.11.0; up to 0.10.2 every architecture interleaved (`rope_i`)
NEOX_BY_ARCH = Span(
    since="0.11.0", since_by="candle#3411: quantized_llama.rs 0.11.0:178-189, :396-428; 0.10.2:180 always `rope_i`"
)


def neox_archs(release: str = NATIVE) -> frozenset[str]:
    """The architectures candle `release`'s quantized_llama pairs NEOX."""
    return CANDLE_NEOX_ARCHS if NEOX_BY_ARCH.holds(release) else frozenset()


# llama.cpp `llama_model_rope_type()` (src/llama-model.cpp): architectures it runs with NEOX
# (or MROPE) pairing that candle's list misses, so candle pairs them interleaved.
LLAMA_CPP_NEOX_NOT_IN_CANDLE = frozenset(
    "bitnet gemma gemma2 gemma3 openelm gptneox nemotron exaone minicpm3 qwen2vl".split()
)
# candle-core quantized/mod.rs:300-321 (parse) and ggml_file.rs:153-188 (load)
CANDLE_PARSES = {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 30}
CANDLE_LOADS = CANDLE_PARSES - {9, 15}
#: GGUF BF16 tensors (type 30) are read from candle-core 0.9.2
GGUF_BF16 = Span(since="0.9.2", since_by="candle-core quantized/mod.rs 0.9.2:290; 0.9.1:152-168 bails on type 30")


def parses(release: str = NATIVE) -> set[int]:
    """The GGUF tensor types candle-core `release` reads from a file's header."""
    return CANDLE_PARSES if GGUF_BF16.holds(release) else CANDLE_PARSES - {30}


def loads(release: str = NATIVE) -> set[int]:
    """The GGUF tensor types candle-core `release` loads."""
    return parses(release) - {9, 15}


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


MOE_LAYER_TENSORS = ("attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate_inp.weight")

# Loader -> (key suffix, candle's reader) of each metadata key it reads with `md_get(..)?`:
# absent, or not of that type, and `from_gguf` fails (gguf_file.rs:250-289 are strict).
# quantized_qwen2.rs:191-196, quantized_qwen3.rs:474-481, quantized_gemma3.rs:288-295,
# quantized_phi3.rs:235-243; quantized_llama is REQUIRED_KEYS above.
LOADER_REQUIRED: dict[str, tuple[tuple[str, str], ...]] = {
    "quantized_qwen2": (
        ("attention.head_count", "U32"),
        ("attention.head_count_kv", "U32"),
        ("embedding_length", "U32"),
        ("context_length", "U32"),
        ("block_count", "U32"),
        ("attention.layer_norm_rms_epsilon", "F32"),
    ),
    "quantized_qwen3": (
        ("attention.head_count", "U32"),
        ("attention.head_count_kv", "U32"),
        ("attention.key_length", "U32"),
        ("block_count", "U32"),
        ("embedding_length", "U32"),
        ("context_length", "U32"),
        ("attention.layer_norm_rms_epsilon", "F32"),
        ("rope.freq_base", "F32"),
    ),
    "quantized_gemma3": (
        ("attention.head_count", "U32"),
        ("attention.head_count_kv", "U32"),
        ("block_count", "U32"),
        ("embedding_length", "U32"),
        ("attention.key_length", "U32"),
        ("attention.value_length", "U32"),
        ("attention.layer_norm_rms_epsilon", "F32"),
        ("attention.sliding_window", "U32"),
    ),
    "quantized_phi3": (
        ("attention.head_count", "U32"),
        ("attention.head_count_kv", "U32"),
        ("block_count", "U32"),
        ("embedding_length", "U32"),
        ("context_length", "U32"),
        ("feed_forward_length", "U32"),
        ("rope.dimension_count", "U32"),
        ("attention.layer_norm_rms_epsilon", "F32"),
    ),
    # quantized_phi.rs:213-218 (`phi2.` keys; a LayerNorm epsilon, not an RMS one)
    "quantized_phi": (
        ("attention.head_count", "U32"),
        ("attention.head_count_kv", "U32"),
        ("block_count", "U32"),
        ("embedding_length", "U32"),
        ("rope.dimension_count", "U32"),
        ("attention.layer_norm_epsilon", "F32"),
    ),
    # smol/quantized_smollm3.rs `QuantizedConfig::from_gguf` (0.11.1:106-118); `context_length` is optional
    "quantized_smollm3": (
        ("vocab_size", "U32"),
        ("embedding_length", "U32"),
        ("feed_forward_length", "U32"),
        ("block_count", "U32"),
        ("attention.head_count", "U32"),
        ("attention.head_count_kv", "U32"),
        ("rope.freq_base", "F32"),
        ("attention.layer_norm_rms_epsilon", "F32"),
        ("rope.dimension_count", "U32"),
    ),
}
# quantized_glm4.rs 0.11.1:374-381 (0.9.2:395-402): quantized_qwen3's keys, in its order
LOADER_REQUIRED["quantized_glm4"] = LOADER_REQUIRED["quantized_qwen3"]
#: quantized_smollm3 reads its keys with `.and_then(|v| v.to_u32().ok())`: one message for a key absent
#: or mistyped (smol/quantized_smollm3.rs 0.11.1:85-104)
ONE_MESSAGE_KEYS = {"quantized_smollm3": "Missing or invalid metadata key: {key}"}


def required_key_error(loader: str, key: str, v: GgufValue | None, want: str) -> str:
    """candle's message when `loader` reads the required `key` (of type `want`) and finds `v`."""
    one = ONE_MESSAGE_KEYS.get(loader)
    if one is not None:
        return one.format(key=key)
    return f"cannot find {key} in metadata" if v is None else f"not a {want.lower()} {candle_debug(v)}"


#: loaders that take their tensors from a `quantized_var_builder::VarBuilder`, whose `get_no_shape` names
#: a missing tensor without its `blk.N.` prefix (quantized_var_builder.rs 0.11.1:87-92)
VAR_BUILDER_LOADERS = frozenset({"quantized_smollm3"})


def missing_tensor_error(loader: str, name: str) -> str:
    """candle's message when `loader` asks for the tensor `name` and the file lacks it."""
    if loader in VAR_BUILDER_LOADERS:
        return f"cannot find tensor {name.split('.', 2)[2] if name.startswith('blk.') else name}"
    return f"cannot find tensor info for {name}"  # gguf_file.rs 0.11.1:577


# quantized_gemma3.rs:270-277: the first prefix with `{p}.attention.head_count`, else gemma3
GEMMA3_PREFIXES = ("gemma3", "gemma2", "gemma", "gemma-embedding")
# quantized_gemma3.rs:27: the local layers' base when no key names it
GEMMA3_DEFAULT_LOCAL_FREQ_BASE = 10_000.0
#: loaders whose cos/sin table has a fixed length, whatever the metadata says (quantized_gemma3.rs:24;
#: quantized_phi.rs 0.11.1:25, :186-190)
FIXED_TABLE_ROWS = {"quantized_gemma3": 131072, "quantized_phi": MAX_SEQ_LEN}
# quantized_phi3.rs:244: `precomput_freqs_cis(rope_dim, max_seq_len, 10_000., device)`
PHI3_FREQ_BASE = 10_000.0
# quantized_phi.rs:219: `precomput_freqs_cis(rope_dim, 10_000., device)`, whatever the metadata says
PHI2_FREQ_BASE = 10_000.0
# quantized_glm4.rs 0.11.1:391: `Some(0.5), //partial rotary factor not embedded in gguf`
GLM4_PARTIAL_ROTARY = 0.5
# smol/quantized_smollm3.rs 0.11.1:117, :121-126: every 4th layer (3, 7, ...) has no RoPE, whatever the model
SMOLLM3_NOPE_INTERVAL = 4
# smol/quantized_smollm3.rs 0.11.1:16-62 (`reconstruct_qk_weights`: `let chunk_size = 128;`)
SMOLLM3_QK_CHUNK = 128


#: loader -> the type it re-quantizes some weights to whatever the file's: quantized_smollm3 quantizes
#: `attn_q`, `attn_k` (after restoring their row order) and the LM head (the embedding) to Q8_0
#: (smol/quantized_smollm3.rs 0.11.1:333-345, :722-724), so an F32 file computes those in 8 bits
REQUANTIZES: dict[str, tuple[str, ...]] = {"quantized_smollm3": ("Q8_0",)}


def smollm3_unpermuted_rows(rows: int) -> int:
    """How many of a Q/K matrix's `rows` quantized_smollm3's `reconstruct_qk_weights` keeps: whole
    `SMOLLM3_QK_CHUNK`-row chunks from each half (`half_rows / chunk_size` of them, twice)."""
    return 2 * (rows // 2 // SMOLLM3_QK_CHUNK) * SMOLLM3_QK_CHUNK


# the architecture whose keys quantized_llama reads (`llama.*`), whatever `general.architecture` says
QUANTIZED_LLAMA_ARCH = "llama"
#: a GGUF edit's key that is no metadata key: the Q/K rows permuted as llama.cpp's converter does
#: (`portkit.verify.candle.gguf_edit.apply_edit` reads the edit)
PERMUTE_QK = "permute_qk"
# GGUF `general.architecture` -> the loader candle 0.11.0 offers for it.
# quantized_llama reads only `llama.*` keys (quantized_llama.rs:378-394): llama.cpp writes
# Mistral and Mixtral conversions as arch `llama`, so they land there too.
GGUF_LOADERS: dict[str, str] = {
    "llama": "quantized_llama",
    "qwen2": "quantized_qwen2",
    "qwen3": "quantized_qwen3",
    "gemma3": "quantized_gemma3",
    "phi3": "quantized_phi3",
    "phi2": "quantized_phi",
    "glm4": "quantized_glm4",
    "smollm3": "quantized_smollm3",
}
#: a loader that lives inside another module directory: the directory `portkit.candle_modules.ADDED` names
LOADER_MODULE = {"quantized_smollm3": "smol"}


#: GGUF architectures candle has a loader for that portkit does not check yet (PK407 names it): the
#: prefix each reads its keys under (quantized_lfm2.rs `lfm2.`; quantized_qwen3_moe.rs:256 reads
#: `general.architecture` and its keys under it)
UNCHECKED_GGUF_LOADERS: dict[str, str] = {
    "qwen3moe": "quantized_qwen3_moe",
    "lfm2": "quantized_lfm2",
}
#: unchecked loaders that run on CUDA only, and why: quantized_qwen3_moe's experts go through
#: `FusedMoeGGUF` (quantized_qwen3_moe.rs:332-345, fused_moe.rs:222-290), whose `moe_gemm_gguf` is built for
#: CUDA alone (candle-nn moe.rs:339-352, the same from 0.9.2 to 0.11.1)
CUDA_ONLY_GGUF_LOADERS: dict[str, str] = {
    "quantized_qwen3_moe": "moe_gemm_gguf is only implemented for the cuda backend",
}


def architecture_of(g: GgufFile) -> str:
    v = g.metadata.get("general.architecture")
    return v.value if v is not None and v.type == "STRING" and isinstance(v.value, str) else ""


def loader_for(arch: str, release: str = NATIVE) -> str:
    """The loader candle `release` reads a GGUF of `arch` with: the architecture's own where that release
    has it (`portkit.candle_modules.ADDED`: quantized_qwen3 arrived in 0.9.2), else quantized_llama, the
    only loader that does not check the architecture."""
    own = GGUF_LOADERS.get(arch)
    return own if own is not None and release_key(loader_added(own)) <= release_key(release) else "quantized_llama"


def loader_added(loader: str) -> str:
    """The release that added `loader` (its module, or the directory it lives in)."""
    return ADDED[LOADER_MODULE.get(loader, loader)]


@dataclass(frozen=True)
class LoaderRepairs:
    """What verify tries on a GGUF that differs, whatever lint said, for one loader: the edits
    that undo a converter's usual slips, and the tensors the loader never reads."""

    permute_qk: bool = False  # the Q/K rows permuted as llama.cpp's converter does
    freq_base_key: str | None = None  # the metadata key the loader takes the rope base from
    unread_tensors: tuple[str, ...] = ()

    def candidates(self, meta: dict[str, Any], reference_theta: float | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{PERMUTE_QK: True}] if self.permute_qk else []
        if (
            self.freq_base_key is not None
            and reference_theta is not None
            and meta.get(self.freq_base_key) != reference_theta
        ):
            out.append({self.freq_base_key: reference_theta})
        return out


# quantized_llama reads `llama.rope.freq_base` whatever the architecture (quantized_llama.rs:392)
# and never `rope_freqs.weight` (its rope tables come from the base alone, :284-290, :430).
LOADER_REPAIRS: dict[str, LoaderRepairs] = {
    "quantized_llama": LoaderRepairs(
        permute_qk=True, freq_base_key="llama.rope.freq_base", unread_tensors=("rope_freqs.weight",)
    ),
}


def loader_repairs(loader: str) -> LoaderRepairs:
    return LOADER_REPAIRS.get(loader, LoaderRepairs())


#: quantized_gemma3 probes GEMMA3_PREFIXES from 0.9.2; 0.9.1 reads `gemma3.` keys only
GEMMA3_PREFIX_PROBE = Span(
    since="0.9.2", since_by="candle#3274: quantized_gemma3.rs 0.9.2:266-283; 0.9.1:271 reads `gemma3.` only"
)


def metadata_prefix(g: GgufFile, loader: str, release: str = NATIVE) -> str:
    """The key prefix `loader` reads in candle `release`: its architecture name; quantized_gemma3 probes."""
    if loader == "quantized_gemma3":
        if not GEMMA3_PREFIX_PROBE.holds(release):
            return "gemma3"
        return next((p for p in GEMMA3_PREFIXES if f"{p}.attention.head_count" in g.metadata), "gemma3")
    # the architecture that routes to the loader (quantized_phi reads `phi2.`); an unlisted loader, its own name
    return next((arch for arch, own in GGUF_LOADERS.items() if own == loader), loader.removeprefix("quantized_"))


#: what the GGUF readers do in some releases only (docs/rules/candle-releases.md lists them)
READER_FACTS: dict[str, Span] = {
    "quantized_llama pairs the architectures of its NEOX list NEOX (`rope`), the rest interleaved": NEOX_BY_ARCH,
    "candle-core reads BF16 GGUF tensors": GGUF_BF16,
    "quantized_gemma3 reads its keys under gemma3., gemma2., gemma. or gemma-embedding.": GEMMA3_PREFIX_PROBE,
}


def md_u32(g: GgufFile, key: str) -> int | None:
    """`md_get(key)?.to_u32()` as candle reads it, None when that fails."""
    v = g.metadata.get(key)
    return int(v.value) if v is not None and v.type == "U32" else None


def md_f32(g: GgufFile, key: str) -> float | None:
    """`md_get(key).and_then(|m| m.to_f32())`: None when absent or not F32 (then a default)."""
    v = g.metadata.get(key)
    return float(v.value) if v is not None and v.type == "F32" else None


#: loader -> (the tensors it reads before the blocks, those of each block `blk.{i}.`, those after), in load
#: order, each with `ct.tensor(..)?` (none optional: `output.weight` falls back to `token_embd.weight`
#: except in quantized_phi3 and quantized_phi, and quantized_smollm3 never reads it)
LOADER_TENSORS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    # quantized_qwen2.rs:205-252 (q/k/v biases required)
    "quantized_qwen2": (
        ("token_embd.weight", "output_norm.weight"),
        (
            "attn_q.weight",
            "attn_k.weight",
            "attn_v.weight",
            "attn_q.bias",
            "attn_k.bias",
            "attn_v.bias",
            "attn_output.weight",
            "ffn_gate.weight",
            "ffn_down.weight",
            "ffn_up.weight",
            "attn_norm.weight",
            "ffn_norm.weight",
        ),
        (),
    ),
    # quantized_phi3.rs:250-283 (`output` required, fused `attn_qkv`)
    "quantized_phi3": (
        ("token_embd.weight", "output_norm.weight", "output.weight"),
        (
            "ffn_up.weight",
            "ffn_down.weight",
            "attn_norm.weight",
            "ffn_norm.weight",
            "attn_qkv.weight",
            "attn_output.weight",
        ),
        (),
    ),
    # quantized_gemma3.rs:318-378
    "quantized_gemma3": (
        ("token_embd.weight", "output_norm.weight"),
        (
            "attn_q.weight",
            "attn_k.weight",
            "attn_v.weight",
            "attn_output.weight",
            "attn_q_norm.weight",
            "attn_k_norm.weight",
            "attn_norm.weight",
            "post_attention_norm.weight",
            "ffn_norm.weight",
            "post_ffw_norm.weight",
            "ffn_gate.weight",
            "ffn_up.weight",
            "ffn_down.weight",
        ),
        (),
    ),
    # quantized_qwen3.rs:492-517, LayerWeights::new :403-427
    "quantized_qwen3": (
        ("token_embd.weight",),
        (
            "attn_norm.weight",
            "ffn_norm.weight",
            "attn_q.weight",
            "attn_k.weight",
            "attn_v.weight",
            "attn_output.weight",
            "attn_q_norm.weight",
            "attn_k_norm.weight",
            "ffn_gate.weight",
            "ffn_up.weight",
            "ffn_down.weight",
        ),
        ("output_norm.weight",),
    ),
    # quantized_phi.rs:221-258: every linear and norm with its bias, `output` required
    "quantized_phi": (
        ("token_embd.weight", "output_norm.weight", "output_norm.bias", "output.weight", "output.bias"),
        tuple(
            f"{n}.{part}"
            for n in ("ffn_up", "ffn_down", "attn_norm", "attn_qkv", "attn_output")
            for part in ("weight", "bias")
        ),
        (),
    ),
    # quantized_glm4.rs 0.11.1:302-318, :166-181 (q/k/v biases optional)
    "quantized_glm4": (
        ("token_embd.weight",),
        (
            "attn_norm.weight",
            "ffn_norm.weight",
            "post_ffw_norm.weight",
            "post_attention_norm.weight",
            "attn_q.weight",
            "attn_k.weight",
            "attn_v.weight",
            "attn_output.weight",
            "ffn_up.weight",
            "ffn_down.weight",
        ),
        ("output_norm.weight",),
    ),
    # smol/quantized_smollm3.rs 0.11.1:317-341, :264-267, :612-622, :674, :718
    "quantized_smollm3": (
        ("token_embd.weight",),
        (
            "attn_v.weight",
            "attn_output.weight",
            "attn_q.weight",
            "attn_k.weight",
            "ffn_gate.weight",
            "ffn_up.weight",
            "ffn_down.weight",
            "attn_norm.weight",
            "ffn_norm.weight",
        ),
        ("output_norm.weight",),
    ),
}


def loader_required_tensors(g: GgufFile, loader: str, release: str = NATIVE) -> list[str]:
    """The tensors a non-llama `loader` reads (`LOADER_TENSORS`), in load order, for the file's blocks."""
    spec = LOADER_TENSORS.get(loader)
    if spec is None:
        return []
    before, per, after = spec
    blocks = min(md_u32(g, f"{metadata_prefix(g, loader, release)}.block_count") or 0, 100_000)
    return [*before, *(f"blk.{i}.{n}" for i in range(blocks) for n in per), *after]


def split_qkv(g: GgufFile, first_missing: str) -> bool:
    """Whether `first_missing`, the first tensor a fused-QKV loader (quantized_phi) lacks, is a block's
    `attn_qkv` written as `attn_q`, `attn_k` and `attn_v` (llama.cpp's converter writes transformers'
    PhiForCausalLM so)."""
    block, _, part = first_missing.rpartition(".attn_qkv.")
    return bool(block) and all(f"{block}.attn_{x}.{part}" in g.tensors for x in "qkv")


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
    loader: str = "quantized_llama"  # the candle loader `general.architecture` routes the file to
    expert_count: int = 0  # `llama.expert_count` as candle reads it (to_u32, else 0)
    merged_experts: bool = False  # llama.cpp's `ffn_{gate,up,down}_exps` layout, which candle never reads
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


def gguf_view(g: GgufFile, release: str = NATIVE) -> GgufView:
    """What candle `release`'s quantized_llama reads from `g`, and the first thing it refuses (its own order:
    a tensor type it cannot parse, the required keys, a zero head count, then the tensors it loads)."""
    md = g.metadata
    readable = parses(release)
    unreadable = next((t.type_id for t in g.tensors.values() if t.type_id not in readable), None)
    refused = None if unreadable is None else f"unknown dtype for tensor {unreadable}"
    vals, missing, wrong = _required_values(md)
    if refused is None:
        refused = _first_key_refusal(missing, wrong)
    freq_base, fb_src, fb_written = _freq_base(md.get("llama.rope.freq_base"))
    arch_v = md.get("general.architecture")
    arch = arch_v.value if arch_v is not None and arch_v.type == "STRING" and arch_v.value is not None else ""
    hc = vals["llama.attention.head_count"]
    emb = vals["llama.embedding_length"]
    head_dim = emb // hc if isinstance(emb, int) and isinstance(hc, int) and hc else None
    if refused is None and hc == 0:
        refused = "attempt to divide by zero (llama.attention.head_count is 0)"
    bc = vals["llama.block_count"]
    experts = md_u32(g, "llama.expert_count") or 0
    if refused is None:
        refused = _tensor_refusal(g, bc if isinstance(bc, int) else None, experts, release)
    ctx = md.get("llama.context_length")
    kl = md.get("llama.attention.key_length")
    vl = md.get("llama.attention.value_length")

    def num(v: GgufValue | None) -> int | None:
        if v is None or v.type not in ("U8", "U16", "U32", "U64", "I8", "I16", "I32", "I64"):
            return None
        return int(v.value)

    return GgufView(
        refused=refused,
        loader=loader_for(arch, release),
        expert_count=experts,
        merged_experts="blk.0.ffn_gate_exps.weight" in g.tensors,
        missing_keys=missing,
        wrong_type_keys=wrong,
        architecture=arch,
        rope_is_neox=arch in neox_archs(release),
        head_count=hc if isinstance(hc, int) else None,
        head_count_kv=_int_or_none(vals["llama.attention.head_count_kv"]),
        block_count=bc if isinstance(bc, int) else None,
        embedding_length=emb if isinstance(emb, int) else None,
        rope_dim=_int_or_none(vals["llama.rope.dimension_count"]),
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


def _int_or_none(v: int | float | None) -> int | None:
    """A U32 key's value (`_required_values` reads U32 keys as ints, None where absent or mistyped)."""
    return v if isinstance(v, int) else None


def _required_values(
    md: Mapping[str, GgufValue],
) -> tuple[dict[str, int | float | None], list[str], dict[str, str]]:
    """REQUIRED_KEYS' values (None where absent or of another type), the absent keys, and the mistyped
    ones with candle's message, in REQUIRED_KEYS' order (quantized_llama.rs reads them so)."""
    vals: dict[str, int | float | None] = {}
    missing: list[str] = []
    wrong: dict[str, str] = {}
    for key in REQUIRED_KEYS:
        v = md.get(key)
        want = "U32" if key in REQUIRED_U32 else "F32"
        if v is None:
            missing.append(key)
            vals[key] = None
        elif v.type != want:
            wrong[key] = f"not a {want.lower()} {candle_debug(v)}"
            vals[key] = None
        else:
            vals[key] = v.value
    return vals, missing, wrong


def _first_key_refusal(missing: list[str], wrong: dict[str, str]) -> str | None:
    """candle's message for the first required key it cannot read, in REQUIRED_KEYS' order."""
    for key in REQUIRED_KEYS:
        if key in missing:
            return f"cannot find {key} in metadata"
        if key in wrong:
            return wrong[key]
    return None


def _freq_base(fb: GgufValue | None) -> tuple[float, Literal["metadata", "default", "default-wrong-type"], str | None]:
    """`llama.rope.freq_base` as candle reads it: an F32, else its default 10000 (and what was written)."""
    if fb is None:
        return DEFAULT_FREQ_BASE, "default", None
    if fb.type != "F32":
        return DEFAULT_FREQ_BASE, "default-wrong-type", candle_debug(fb)
    return float(fb.value), "metadata", None


def _tensor_refusal(g: GgufFile, block_count: int | None, experts: int, release: str) -> str | None:
    """The first tensor quantized_llama loads that `g` lacks or holds in a type the release cannot load."""
    needed = ["token_embd.weight", "output_norm.weight"]
    for i in range(min(block_count or 0, 100_000)):
        if experts <= 1:
            needed += [f"blk.{i}.{n}" for n in LAYER_TENSORS]
        else:  # quantized_llama.rs:459-488
            needed += [f"blk.{i}.{n}" for n in MOE_LAYER_TENSORS]
            needed += [f"blk.{i}.ffn_{w}.{e}.weight" for e in range(experts) for w in ("gate", "down", "up")]
            needed += [f"blk.{i}.attn_norm.weight", f"blk.{i}.ffn_norm.weight"]
    for n in needed:
        info = g.tensors.get(n)
        if info is None:
            return f"cannot find tensor info for {n}"
        if info.type_id not in loads(release):
            return f"quantized type {info.type_name.replace('_K', 'K')} is not supported yet"
    return None
