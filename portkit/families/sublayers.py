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
    "post_attention_layernorm": NORM,
    "pre_feedforward_layernorm": NORM,
    "mlp": MLP,
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


def of(family: Family | None) -> tuple[str, ...]:
    """The family's sub-layers in computation order (its `SUBLAYERS` trait), else DEFAULT."""
    return DEFAULT if family is None else tuple(family.trait("SUBLAYERS"))


def split(name: str) -> tuple[int, str] | None:
    """`layer.3.self_attn.q_proj` -> (3, "self_attn.q_proj"); None for anything else."""
    if not name.startswith("layer."):
        return None
    head, _, sub = name[len("layer.") :].partition(".")
    if not sub or not head.isdigit() or (head != "0" and head.startswith("0")) or sub not in ROLES:
        return None
    return int(head), sub


def is_sublayer(name: str) -> bool:
    """`layer.N.<path>` for a sub-layer the kit knows: a value inside decoder layer N."""
    return split(name) is not None
