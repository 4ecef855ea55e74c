"""candle 0.11.0's own code, driven from Python: config parsing, the llama and quantized_llama runners.

The compiled module is private (`portkit_native._native`); this package re-exports an explicit list.
"""

from __future__ import annotations

import json
from typing import Any

from . import _native
from ._native import (
    CandleError,
    CandlePanic,
    ConfigError,
    DeviceUnavailableError,
    GgufRunner,
    LlamaRunner,
    NativeError,
    build_info,
    capture_layers,
    check_device,
)

__all__ = [
    "CandleError",
    "CandlePanic",
    "ConfigError",
    "DeviceUnavailableError",
    "GgufRunner",
    "LlamaRunner",
    "NativeError",
    "build_info",
    "candle_config",
    "capture_layers",
    "check_device",
]


def candle_config(config_json: str) -> dict[str, Any]:
    """candle's `LlamaConfig` serde parse plus `into_config(false)`, as its effective values.

    Raises `ConfigError` carrying serde_json's message unchanged when candle refuses the JSON.
    """
    return json.loads(_native.candle_config_json(config_json))
