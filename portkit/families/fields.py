"""serde deserializers shared by the family mirrors: candle-nn's `Activation` enum.

`Activation` (candle-nn-0.11.0/src/activation.rs:5-27) is `#[serde(rename_all = "lowercase")]`
with aliases `gelu` (Gelu, erf GELU), `gelu_new` (NewGelu, tanh) and `gelu_pytorch_tanh`
(GeluPytorchTanh, tanh); `Elu(f64)` and `LeakyRelu(f64)` are newtype variants. Values are
reported by their serialized name, as `serde_json::to_value(activation)` writes them.
"""

from __future__ import annotations

from portkit.semantics import serde
from portkit.semantics.serde import Pairs, SerdeError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

ACTIVATION_VARIANTS = (
    "gelu", "newgelu", "relu", "relu2", "relu6", "silu", "sigmoid", "hardsigmoid", "swiglu",
    "swish", "mish", "hardswish", "elu", "leakyrelu", "gelupytorchtanh",
)  # fmt: skip
ACTIVATION_ALIASES = {"gelu_new": "newgelu", "gelu_pytorch_tanh": "gelupytorchtanh"}
_NEWTYPE = ("elu", "leakyrelu")
# serde lists the variant names and their aliases in declaration order in "expected one of"
_EXPECTED = ", ".join(
    f"`{n}`" for n in ("gelu", "newgelu", "gelu_new", "relu", "relu2", "relu6", "silu", "sigmoid", "hardsigmoid", "swiglu",
                       "swish", "mish", "hardswish", "elu", "leakyrelu", "gelupytorchtanh", "gelu_pytorch_tanh")
)  # fmt: skip
# which activations compute GELU with tanh (transformers' gelu_pytorch_tanh / gelu_new) vs erf
TANH_GELU = ("newgelu", "gelupytorchtanh")


def de_activation(v: Any) -> Any:
    if isinstance(v, str):
        name = ACTIVATION_ALIASES.get(v, v)
        if name not in ACTIVATION_VARIANTS:
            raise SerdeError(f"unknown variant `{v}`, expected one of {_EXPECTED}")
        if name in _NEWTYPE:
            raise SerdeError("invalid type: unit variant, expected newtype variant")
        return name
    if isinstance(v, Pairs) and len(v) == 1:
        k, x = v[0]
        name = ACTIVATION_ALIASES.get(k, k)
        if name not in ACTIVATION_VARIANTS:
            raise SerdeError(f"unknown variant `{k}`, expected one of {_EXPECTED}")
        if name in _NEWTYPE:
            return {name: serde.de_f64(x)}
        raise serde.invalid_type(x, "unit variant")
    raise serde.invalid_type(v, "enum Activation")
