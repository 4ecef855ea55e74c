"""candle 0.11.0's own code, driven from Python: each decoder family's config parse, runner and
weight requests, per-layer capture where a proven copy of the forward exists, the GGUF loaders, and
the `tokenizers` crate candle-core depends on.

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
    FamilyRunner,
    GgufRunner,
    LlamaRunner,
    NativeError,
    Tokenizer,
    TokenizerError,
    build_info,
    capture_families,
    capture_layers,
    check_device,
    cpu_threads,
    families,
    gguf_capture_loaders,
    gguf_loaders,
    release_memory,
    requested_tensors,
)

__all__ = [
    "CandleError",
    "CandlePanic",
    "ConfigError",
    "DeviceUnavailableError",
    "FamilyRunner",
    "GgufRunner",
    "LlamaRunner",
    "NativeError",
    "Tokenizer",
    "TokenizerError",
    "build_info",
    "candle_config",
    "capture_families",
    "capture_layers",
    "check_device",
    "cpu_threads",
    "families",
    "gguf_capture_loaders",
    "gguf_loaders",
    "release_memory",
    "requested_tensors",
]


def candle_config(config_json: str, family: str = "llama") -> dict[str, Any]:
    """`family`'s serde `Config` parse (llama and granite: plus `into_config(false)`), as its effective values.

    Raises `ConfigError` carrying serde_json's message unchanged when candle refuses the JSON, and
    ValueError for a family this wheel does not know.
    """
    return json.loads(_native.candle_config_json(config_json, family))
