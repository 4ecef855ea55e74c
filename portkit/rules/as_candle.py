"""How transformers must run to compute what candle computes: the reference-side counterfactual a
rule declares for a behaviour candle hard-codes (`CandleEdit.as_candle`).

candle 0.11.0 hard-codes some behaviours no edit on its side undoes: quantized_gemma3's SiLU,
quantized_phi3's rope base of 10000, a bias its module never reads. verify proves such a finding
the other way round: transformers, run with the finding's edit, computes what candle computes,
so candle agrees with it where it does not agree with transformers as written. The edit is data
the rule gives (a config edit, a tensor edit, candle's RoPE table dtype); verify only applies it
(`portkit.verify.reference.job`).

Config edits are keyed as config.json is written: a dotted key reaches into a nested object
(`rope_parameters.rope_theta`), None removes a key, and keys apply shortest first, so that one
finding can replace `rope_parameters` while another sets a key inside it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from portkit.rules.base import Context

#: What a tensor edit does to the tensor as the reference loads it: "zero", or `affine(mul, add)`.
ZERO = "zero"
AFFINE = "affine"
#: A module edit: the Linear whose weight the key names computes as a ggml Q8_0 matmul on a CPU, its
#: weight and its input rounded to Q8_0 blocks of 32 (a loader that re-quantizes, quantized_smollm3). The
#: key may name a tied weight the checkpoint does not store (`lm_head.weight`).
Q8_0 = "q8_0"


def affine(mul: float, add: float) -> str:
    """The tensor edit `w * mul + add`, as data ("affine 1.0 1.0"): a gain candle adds to a weight
    (gemma4's RmsNorm multiplies by `weight + 1`), a constant it folds in (a scale on the scores
    moved into `q_norm`), or a constant it reads instead (`mul` 0)."""
    return f"{AFFINE} {float(mul)!r} {float(add)!r}"


def parse_affine(how: str) -> tuple[float, float] | None:
    """(mul, add) of an `affine` tensor edit, None for any other text."""
    parts = how.split(" ")
    if len(parts) != 3 or parts[0] != AFFINE:
        return None
    try:
        return float(parts[1]), float(parts[2])
    except ValueError:
        return None


def edit(
    what: str,
    *,
    config: Mapping[str, Any] | None = None,
    tensors: Iterable[str] = (),
    rope_table: str | None = None,
    tensor_edits: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A `CandleEdit.as_candle`: `what` in words ("SiLU in the MLP"), config.json edits, tensors to
    zero (a bias candle never reads computes as a zero one), `tensor_edits` (name -> `ZERO`,
    `affine(..)` or `Q8_0`), `rope_table` ("f16", "bf16"): the rotary cos/sin as candle builds its table in
    that dtype (`portkit.verify.reference.rope_table`)."""
    out: dict[str, Any] = {"what": what}
    if rope_table is not None:
        out["rope_table"] = rope_table
    if config:
        out["config"] = dict(config)
    edits = {n: ZERO for n in tensors}
    edits.update(tensor_edits or {})
    if edits:
        out["tensors"] = edits
    return out


def raw_config(ctx: Context) -> dict[str, Any] | None:
    """config.json as written, when the model has one (a GGUF linted alone has none)."""
    doc = ctx.facts.config
    return doc.value if doc is not None and isinstance(doc.value, dict) else None


def rope(config: Mapping[str, Any] | None, *, theta: float | None = None, plain: bool = False) -> dict[str, Any]:
    """The config edits that make transformers rotate with `theta` and/or plain RoPE (no scaling,
    `plain`), wherever this config keeps its rope settings: `rope_parameters` (transformers 5;
    per layer type for gemma3) when it has it, else the top-level `rope_theta` / `rope_scaling`
    transformers 5 reads into it. A config transformers 5 reads `rope_parameters` from ignores a
    top-level `rope_theta`, so the edit must go where the config has it."""
    out: dict[str, Any] = {}
    cfg = dict(config or {})
    rp = cfg.get("rope_parameters")
    if isinstance(rp, dict) and rp:
        nested = all(isinstance(v, dict) for v in rp.values())
        for key, sub in ((f"rope_parameters.{k}", v) for k, v in rp.items()) if nested else (("rope_parameters", rp),):
            if plain:
                kept = {k: sub[k] for k in ("rope_theta", "partial_rotary_factor") if k in sub}
                if "rope_theta" not in kept and "rope_theta" in cfg:
                    kept["rope_theta"] = cfg["rope_theta"]
                out[key] = {"rope_type": "default", **kept}
            if theta is not None:
                out[f"{key}.rope_theta"] = theta
        return out
    if plain:
        out["rope_scaling"] = None
    if theta is not None:
        out["rope_theta"] = theta
    return out


def partial_rotary(config: Mapping[str, Any] | None, factor: float) -> dict[str, Any]:
    """The config edit that makes transformers rotate `factor` of each head: where the config keeps
    `partial_rotary_factor` (top level, or `rope_parameters`, as transformers 5 saves it), else inside
    `rope_parameters` when it has one, else at the top level."""
    cfg = dict(config or {})
    rp = cfg.get("rope_parameters")
    if "partial_rotary_factor" not in cfg and isinstance(rp, dict) and rp:
        return {"rope_parameters.partial_rotary_factor": factor}
    return {"partial_rotary_factor": factor}
