"""serde deserializers shared by the family mirrors: candle-nn's `Activation` enum.

`Activation` (candle-nn-0.11.0/src/activation.rs:5-27) is `#[serde(rename_all = "lowercase")]`
with aliases `gelu` (Gelu, erf GELU), `gelu_new` (NewGelu, tanh) and `gelu_pytorch_tanh`
(GeluPytorchTanh, tanh); `Elu(f64)` and `LeakyRelu(f64)` are newtype variants. Values are
reported as the native oracle reports them (`portkit_native.candle_config`): the three GELUs by
the name transformers also uses (`gelu`, `gelu_new`, `gelu_pytorch_tanh`), the others by their
serialized name.

serde_json reads an enum from a string (a unit variant) or a one-key object (a newtype
variant); anything else, `null` included, is `expected value` before any type is named
(serde_json `deserialize_enum`), and a newtype variant written as a unit one, or the reverse,
names the variant kind it wanted (`expected unit` / `expected newtype variant`).
"""

from __future__ import annotations

from portkit.semantics import serde
from portkit.semantics.serde import Pairs, SerdeError

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (see portkit/__init__.py)
if TYPE_CHECKING:
    from typing import Any

ACTIVATION_VARIANTS = (
    "gelu",
    "newgelu",
    "relu",
    "relu2",
    "relu6",
    "silu",
    "sigmoid",
    "hardsigmoid",
    "swiglu",
    "swish",
    "mish",
    "hardswish",
    "elu",
    "leakyrelu",
    "gelupytorchtanh",
)
ACTIVATION_ALIASES = {"gelu_new": "newgelu", "gelu_pytorch_tanh": "gelupytorchtanh"}
_NEWTYPE = ("elu", "leakyrelu")
# serde lists each variant's aliases before its name in "expected one of" (the oracle's order)
_EXPECTED = ", ".join(
    f"`{n}`"
    for n in (
        "gelu",
        "gelu_new",
        "newgelu",
        "relu",
        "relu2",
        "relu6",
        "silu",
        "sigmoid",
        "hardsigmoid",
        "swiglu",
        "swish",
        "mish",
        "hardswish",
        "elu",
        "leakyrelu",
        "gelu_pytorch_tanh",
        "gelupytorchtanh",
    )
)
# the name a parsed variant is reported by (the native oracle's `activation_name`)
REPORTED = {"newgelu": "gelu_new", "gelupytorchtanh": "gelu_pytorch_tanh"}
# which activations compute GELU with tanh (transformers' gelu_pytorch_tanh / gelu_new) vs erf
TANH_GELU = ("gelu_new", "gelu_pytorch_tanh")


def de_activation(v: Any) -> Any:
    if isinstance(v, str):
        name = ACTIVATION_ALIASES.get(v, v)
        if name not in ACTIVATION_VARIANTS:
            raise SerdeError(f"unknown variant `{v}`, expected one of {_EXPECTED}")
        if name in _NEWTYPE:
            raise SerdeError("invalid type: unit variant, expected newtype variant")
        return REPORTED.get(name, name)
    if isinstance(v, Pairs) and len(v) == 1:
        k, x = v[0]
        name = ACTIVATION_ALIASES.get(k, k)
        if name not in ACTIVATION_VARIANTS:
            raise SerdeError(f"unknown variant `{k}`, expected one of {_EXPECTED}")
        if name in _NEWTYPE:
            return {name: serde.de_f64(x)}
        if x is None:  # a unit variant's content is `()`, which serde_json reads from null
            return REPORTED.get(name, name)
        raise serde.invalid_type(x, "unit")
    # serde_json's deserialize_enum accepts only a string or an object
    raise SerdeError("expected value")
