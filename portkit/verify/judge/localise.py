"""Inside the first bad layer: which sub-layer leaves the reference first, how its error lies over
the prompt's positions, and what that pattern points to.

The pattern is the evidence. Position 0 has rotation angle 0 and attends to one key (its softmax
is 1 whatever the scores), so whatever only changes the attention scores (the rotary embedding,
the attention scale or softcap) leaves position 0 exact, while a projection's weight layout or
bias, a norm's eps or an MLP's wiring is wrong from position 0 on. Which sub-layers before the
first bad one agree narrows it further: q/k/v agreeing and the attention output differing puts
the fault between the projections and o_proj.

Pure numpy over the values both sides hold (`portkit compare`'s dumps, verify's capture).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from portkit.families import sublayers
from portkit.verify.judge import floor as floors
from portkit.verify.judge.checks import LayerCheck

#: Positions shown in the text report; the JSON keeps all of them.
SHOWN_POSITIONS = 16


@dataclass(frozen=True)
class Localisation:
    """Where the divergence starts, as precisely as the values allow."""

    layer: str  # the first value between the layers over the tolerance: `layer.N`, embeddings, norm, logits
    name: str  # the first bad name: the first sub-layer of `layer` over the tolerance, else `layer`
    rel: float  # `name`'s own relative error (its row in the table)
    per_position: list[float]  # `name`'s max|diff| at each position / its max|ref| (max = rel)
    position0_agrees: bool | None  # None: no positions (last-position logits)
    diagnosis: str  # one line: the pattern, then what it points to
    candidates: list[str]  # what it points to
    agreeing: list[str] = field(default_factory=list)  # sub-layers of `layer` before `name`, within tolerance
    #: sub-layer names the reference has for `layer` that the candidate does not: dumping them
    #: would localise it (further)
    missing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {
            "layer": self.layer,
            "name": self.name,
            "rel": self.rel,
            "per_position": list(self.per_position),
            "position0_agrees": self.position0_agrees,
            "diagnosis": self.diagnosis,
            "candidates": list(self.candidates),
            "agreeing": list(self.agreeing),
            "missing": list(self.missing),
        }

    def position_line(self, shown: int = SHOWN_POSITIONS) -> str:
        head = "  ".join(f"{i}: {e:.1e}" for i, e in enumerate(self.per_position[:shown]))
        more = f"  ... {len(self.per_position) - shown} more" if len(self.per_position) > shown else ""
        return head + more


def per_position(ref: np.ndarray, got: np.ndarray) -> list[float]:
    """Max |diff| at each position (row) over the value's max |ref|: the table's denominator, so
    the largest entry is the table's relative error."""
    r = np.asarray(ref, dtype=np.float64)
    g = np.asarray(got, dtype=np.float64)
    if r.ndim != 2 or r.shape != g.shape or r.size == 0:
        return []
    scale = float(np.abs(r).max())
    diff = np.abs(r - g).max(axis=1)
    return [float(x) for x in (diff / scale if scale > 0 else diff)]


def _positions(
    check: LayerCheck, ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], name: str
) -> tuple[list[float], bool | None]:
    """`name`'s error per position, and whether position 0 is within its bound (None: no
    positions): against the truth and its measured bound where the run has them, else against
    the reference and the fallback's rtol."""
    errors = per_position(ref[name], got[name])
    row = check.row(name)
    bound = row.rel_bound if row is not None else None
    if not errors:
        return errors, None
    if bound is not None and name in check.truth and np.ndim(check.truth[name]) == 2:
        own = floors.per_position(check.truth[name], got[name])
        scale = row.floor.scale if row is not None and row.floor is not None else 0.0
        return errors, bool(own[0] / scale <= bound) if scale > 0 else bool(own[0] == 0)
    return errors, errors[0] <= check.rtol


# what each kind of first bad sub-layer points to (the pattern's own words are added around them)
NORM_CANDIDATES = ["eps", "weight offset (gemma's 1 + w)"]
PROJECTION_CANDIDATES = ["weight layout", "bias"]
SCORES_CANDIDATES = ["rotary embedding (theta, pairing, scaling)", "the attention scale/softcap"]
ATTENTION_OUTPUT_CANDIDATES = ["o_proj (weight layout or bias)", "the value path (v heads, key-value grouping)"]
MLP_CANDIDATES = ["gate/up order", "the activation (hidden_act)", "down_proj weight layout"]
RESIDUAL_CANDIDATES = ["the residual additions (a residual scale, a dropped or doubled residual)"]


def _either(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _short(sub: str) -> str:
    return sub.removeprefix("self_attn.")


def localise(
    check: LayerCheck,
    ref: Mapping[str, np.ndarray],
    got: Mapping[str, np.ndarray],
    *,
    available: Sequence[str] = (),
    no_sublayers_hint: str | None = None,
) -> Localisation | None:
    """The first bad layer's localisation, or None when no value between the layers is over.

    `available`: every name the reference holds (its sub-layers not in `got` are the ones a
    candidate could add); `no_sublayers_hint`: what to say when neither side has any sub-layer of
    the first bad layer (a --layers-only reference; a family whose capture has none)."""
    first = check.first_over
    if first is None:
        return None
    row = check.row(first)
    assert row is not None
    if first in ("embeddings", "norm", "logits"):
        return _between_layers(first, row.rel, ref, got, check)
    prefix = first + "."
    subs = [r for r in check.rows if r.name.startswith(prefix) and sublayers.is_sublayer(r.name)]
    have = {r.name for r in subs}
    missing = [n for n in available if n.startswith(prefix) and sublayers.is_sublayer(n) and n not in have]
    bad = next((r for r in subs if r.over), None)
    if bad is None:
        return _no_bad_sublayer(first, row.rel, subs, missing, ref, got, check, no_sublayers_hint)
    sub = sublayers.split(bad.name)
    assert sub is not None
    # the rows are in computation order, and `bad` is the first over: everything before it agrees
    agreeing = [r.name for r in subs[: subs.index(bad)] if not r.nonfinite]
    order = [n for n in available if n.startswith(prefix)] or [r.name for r in subs]  # computation order
    missing_before = [n for n in missing if n in order and bad.name in order and order.index(n) < order.index(bad.name)]
    errors, pos0 = _positions(check, ref, got, bad.name)
    diagnosis, candidates = _diagnose(sub[1], pos0, agreeing, missing_before)
    return Localisation(first, bad.name, bad.rel, errors, pos0, diagnosis, candidates, agreeing, missing)


def _sub(name: str) -> str:
    """`layer.3.self_attn.q_proj` -> "self_attn.q_proj" (a sub-layer row's name, as `localise` picks them)."""
    parts = sublayers.split(name)
    assert parts is not None, name
    return parts[1]


def _diagnose(sub: str, pos0: bool | None, agreeing: list[str], missing_before: list[str]) -> tuple[str, list[str]]:
    role = sublayers.role(sub)
    agreed = [_sub(n) for n in agreeing]  # in computation order
    unseen = [_sub(n) for n in missing_before]
    name = _short(sub)
    if role is None:
        before = f" ({', '.join(agreed[-1:])} before it agrees)" if agreed else ""
        return f"{sub} is the first sub-layer that differs{before}: no diagnosis for this sub-layer", []
    if role == sublayers.NORM:
        # input_layernorm reads the previous layer's output, which agrees; a later norm reads
        # what this layer computed before it, which agrees only as far as it was dumped
        lead = f"{name} differs" + (
            " (nothing before it in this layer was dumped)"
            if not agreed and (sub != "input_layernorm" if sub in sublayers.ROLES else unseen)
            else ""
        )
        return f"{lead}: {_either(NORM_CANDIDATES)}", list(NORM_CANDIDATES)
    if role == sublayers.PROJECTION:
        if not pos0:
            return f"{name} differs from position 0: {_either(PROJECTION_CANDIDATES)}", list(PROJECTION_CANDIDATES)
        cands = [
            "dumped after RoPE (put the projection's output, before the rotation)",
            "rotary embedding (theta, pairing, scaling)",
        ]
        return f"{name} differs but position 0 agrees: {_either(cands)}", cands
    if role == sublayers.ATTENTION:
        seen = [s for s in agreed if sublayers.role(s) == sublayers.PROJECTION]
        hidden = [s for s in unseen if sublayers.role(s) == sublayers.PROJECTION]
        fused = len(seen) == 1 and seen[0].rsplit(".", 1)[-1] in sublayers.FUSED_QKV
        if seen and not hidden and (len(seen) == 3 or fused):
            lead = "q/k/v projections agree, attention output differs"
        elif seen:
            lead = f"{', '.join(_short(s) for s in seen)} agree{'s' if len(seen) == 1 else ''}"
            lead += f" ({', '.join(_short(s) for s in hidden)} not dumped)" if hidden else ""
            lead += ", attention output differs"
        else:
            lead = "attention output differs (q/k/v projections not dumped)"
        if pos0:
            return f"{lead}, position 0 agrees: {_either(SCORES_CANDIDATES)}", list(SCORES_CANDIDATES)
        return f"{lead} from position 0: {_either(ATTENTION_OUTPUT_CANDIDATES)}", list(ATTENTION_OUTPUT_CANDIDATES)
    # the MLP: its input norm agreeing leaves its own wiring
    norms = [s for s in agreed if sublayers.role(s) == sublayers.NORM and s != "input_layernorm"]
    lead = f"{norms[-1]} agrees, mlp differs" if norms else "mlp differs"
    return f"{lead}{' from position 0' if pos0 is False else ''}: {_either(MLP_CANDIDATES)}", list(MLP_CANDIDATES)


def _no_bad_sublayer(
    layer: str,
    rel: float,
    subs: list,
    missing: list[str],
    ref: Mapping[str, np.ndarray],
    got: Mapping[str, np.ndarray],
    check: LayerCheck,
    hint: str | None,
) -> Localisation:
    errors, pos0 = _positions(check, ref, got, layer)
    if subs:
        cands = list(RESIDUAL_CANDIDATES) + ([f"a sub-layer not dumped ({', '.join(missing)})"] if missing else [])
        text = f"every sub-layer dumped for {layer} agrees: {_either(cands)}"
        return Localisation(layer, layer, rel, errors, pos0, text, cands, [r.name for r in subs], missing)
    if missing:
        text = f"{layer} differs; its sub-layers would localise it: dump {', '.join(missing)}"
    else:
        text = f"{layer} differs; {hint}" if hint else f"{layer} differs (no sub-layer values to localise it)"
    return Localisation(layer, layer, rel, errors, pos0, text, [], [], missing)


def _between_layers(
    name: str, rel: float, ref: Mapping[str, np.ndarray], got: Mapping[str, np.ndarray], check: LayerCheck
) -> Localisation:
    errors, pos0 = _positions(check, ref, got, name)
    if name == "embeddings":
        cands = ["the embedding weights", "an embedding scale (gemma multiplies by sqrt(hidden_size))"]
        text = f"embeddings differ: {_either(cands)}"
    elif name == "norm":
        cands = ["the final norm's eps", "its weight offset (gemma's 1 + w)"]
        text = f"every layer agrees, the final norm differs: {_either(cands)}"
    else:
        cands = ["lm_head (tied or not, weight layout)", "a final logit scale or softcap"]
        text = f"the final norm agrees, the logits differ: {_either(cands)}"
    return Localisation(name, name, rel, errors, pos0, text, cands)
