"""Sub-layers: the submodules of transformers' decoder layer `model.layers.N` whose outputs the
porting kit records, named by attribute path (`self_attn.q_proj`), and what each one is.

Which sub-layers a family has, in the order its decoder layer computes them, is data in the
family's module (the `SUBLAYERS` trait in `portkit.families.<name>`); a family that does not
set it has the decoder layer every Llama-shaped model has (`DEFAULT`: Llama, Mistral, Qwen2/3,
Gemma, Granite, StarCoder2, StableLM, and Mixtral's and Qwen3-MoE's with the sparse MoE block
as `mlp`; q/k norms act per head inside `self_attn` and are not recorded). The roles below are what a sub-layer
*is*, whatever the family: what the localisation of a mismatch reasons about
(`portkit.verify.judge.localise`).

Every value is the submodule's output as `[positions, features]`: the norms' and the MLP's
`[T, hidden]`, the projections' `[T, heads * head_dim]` (before RoPE: transformers rotates in
the attention's forward, after the projection module returns), `self_attn` after `o_proj`.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from portkit.families import Family

NORM = "norm"
PROJECTION = "projection"
ATTENTION = "attention"
MLP = "mlp"

#: Every sub-layer name the kit knows, with its role (portkit-dump's list is the same: a test
#: holds them together).
ROLES: dict[str, str] = {
    "input_layernorm": NORM,
    "self_attn.q_proj": PROJECTION,
    "self_attn.k_proj": PROJECTION,
    "self_attn.v_proj": PROJECTION,
    "self_attn.qkv_proj": PROJECTION,  # phi3: one fused projection
    "self_attn": ATTENTION,
    "post_self_attn_layernorm": NORM,  # glm4: the attention's output, before the residual
    "post_attention_layernorm": NORM,
    "pre_feedforward_layernorm": NORM,
    "mlp": MLP,
    "post_mlp_layernorm": NORM,  # glm4: the MLP's output, before the residual
    "post_feedforward_layernorm": NORM,
}

#: The decoder layer of Llama and the families shaped like it (transformers' LlamaDecoderLayer).
DEFAULT: tuple[str, ...] = (
    "input_layernorm",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn",
    "post_attention_layernorm",
    "mlp",
)


#: in a list of sub-layers: every module with weights inside each decoder layer, by its path
#: (`portkit reference` on a model portkit has no family for)
EVERY_MODULE = "*"


def of(family: Family | None) -> tuple[str, ...]:
    """The family's sub-layers in computation order (its `SUBLAYERS` trait), else DEFAULT."""
    return DEFAULT if family is None else tuple(family.traits.sublayers)


#: a module path inside a decoder layer as torch names it: `self_attn.q_proj`, `mlp.experts.0.w1`
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.(?:[A-Za-z_][A-Za-z0-9_]*|0|[1-9][0-9]*))*")


def split(name: str) -> tuple[int, str] | None:
    """`layer.3.self_attn.q_proj` -> (3, "self_attn.q_proj"); None for anything else. Any module
    path is a sub-layer (a model portkit has no family for is recorded as transformers names its
    modules: GPT-2's `attn.c_attn`); `ROLES` are the ones the kit can reason about."""
    if not name.startswith("layer."):
        return None
    head, _, sub = name[len("layer.") :].partition(".")
    if not sub or not head.isdigit() or (head != "0" and head.startswith("0")) or not _PATH.fullmatch(sub):
        return None
    return int(head), sub


#: module names other models give the parts `ROLES` names (GPT-2's `ln_1`, `attn`, `attn.c_attn`;
#: GPT-NeoX's `attention.query_key_value`; Mixtral's `block_sparse_moe`)
_ATTENTION = frozenset({"self_attn", "attn", "attention", "self_attention"})
_MLP = frozenset({"mlp", "feed_forward", "ffn", "block_sparse_moe", "moe"})
#: one projection computing q, k and v at once
FUSED_QKV = frozenset({"qkv_proj", "c_attn", "query_key_value", "Wqkv", "qkv"})
_QKV = frozenset({"q_proj", "k_proj", "v_proj"}) | FUSED_QKV
#: the attention's output projection: its output is the attention's (Llama's `self_attn` returns `o_proj`'s)
_ATTENTION_OUT = frozenset({"o_proj", "dense", "c_proj", "out_proj"})
_NORM = re.compile(r".*norm.*|ln(_?[0-9]+|_[a-z]+)?", re.IGNORECASE)


def role(sub: str) -> str | None:
    """What a sub-layer is (`NORM`, `PROJECTION`, `ATTENTION`, `MLP`): `ROLES`, else read from its
    name as transformers' models name these parts; None where the name says nothing (localisation
    then has no diagnosis for it)."""
    if sub in ROLES:
        return ROLES[sub]
    parts = sub.split(".")
    if _NORM.fullmatch(parts[-1]):
        return NORM
    if len(parts) == 1:
        return ATTENTION if sub in _ATTENTION else MLP if sub in _MLP else None
    if len(parts) == 2 and parts[0] in _ATTENTION:
        return PROJECTION if parts[1] in _QKV else ATTENTION if parts[1] in _ATTENTION_OUT else None
    return None


def is_sublayer(name: str) -> bool:
    """`layer.N.<path>`: a value inside decoder layer N."""
    return split(name) is not None
