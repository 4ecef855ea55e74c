"""Type stubs for portkit_native: candle 0.11.0's llama and quantized_llama, from Python."""

from os import PathLike
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

__all__: list[str]

class NativeError(Exception):
    """Base class of every error portkit_native raises for candle."""

class ConfigError(NativeError):
    """candle's serde refused the config JSON; the message is serde_json's, unchanged."""

class CandleError(NativeError):
    """candle returned an Err; the message is candle's, unchanged."""

class CandlePanic(NativeError):
    """candle panicked; the panic was caught and the message keeps candle's location and text."""

class DeviceUnavailableError(NativeError):
    """The device is not built into this wheel (or not present); the message says how to get it."""

def candle_config(config_json: str) -> dict[str, Any]:
    """candle's `LlamaConfig` serde parse plus `into_config(false)`, as effective values:
    hidden_size, intermediate_size, vocab_size, num_hidden_layers, num_attention_heads,
    num_key_value_heads, head_dim (hidden_size // num_attention_heads), rms_norm_eps, rope_theta,
    bos_token_id, eos_token_id (None | int | list[int]), rope_scaling (None | dict),
    max_position_embeddings, tie_word_embeddings, use_flash_attn. Raises ConfigError."""

def build_info() -> dict[str, Any]:
    """candle version and the devices compiled into this wheel."""

def check_device(device: str) -> None:
    """Raises DeviceUnavailableError (ValueError for an unknown name) unless `device` can be used."""

def capture_layers(
    weight_files: Sequence[str | PathLike[str]],
    config_json: str,
    ids: Sequence[int],
    dtype: str = "f32",
    cache_dtype: str | None = None,
    device: str = "cpu",
) -> dict[str, npt.NDArray[np.float32]]:
    """`LlamaRunner.capture` without a runner alive: loads only the copy of the forward, so the
    weights are resident once. Same names and shapes as `LlamaRunner.capture`."""

class LlamaRunner:
    """`candle_transformers::models::llama::Llama`, loaded as a candle user would:
    `VarBuilder::from_mmaped_safetensors(weight_files, dtype, device)` and `Llama::load` with the
    config parsed from `config_json` (a string, so a patched config can run on the same weights).
    `cache_dtype` defaults to `dtype`; a different one reproduces candle's rope dtype error."""

    def __init__(
        self,
        weight_files: Sequence[str | PathLike[str]],
        config_json: str,
        dtype: str = "f32",
        cache_dtype: str | None = None,
        device: str = "cpu",
        use_flash_attn: bool = False,
    ) -> None: ...
    def config_json(self) -> str:
        """candle's effective config for this runner, as JSON."""
    def last_logits(self, ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """[vocab] logits of the last position, from the library's `Llama::forward`."""
    def teacher_forced_logits(self, ids: Sequence[int], prefill: int = 1) -> npt.NDArray[np.float32]:
        """[len(ids) - prefill + 1, vocab]: prefill `ids[:prefill]`, then one token at a time with
        the KV cache; row j holds the logits after `ids[:prefill + j]`."""
    def greedy(self, ids: Sequence[int], n: int) -> list[int]:
        """n greedily decoded token ids after `ids`, with the KV cache."""
    def capture(self, ids: Sequence[int]) -> dict[str, npt.NDArray[np.float32]]:
        """Per-layer values from a copy of the forward proven bit-identical to the library:
        "embeddings", "layer.0".., "norm" (each [len(ids), hidden]) and "logits" ([vocab])."""

class GgufRunner:
    """`candle_transformers::models::quantized_llama::ModelWeights::from_gguf` on a GGUF file."""

    def __init__(self, path: str | PathLike[str], device: str = "cpu") -> None: ...
    def last_logits(self, ids: Sequence[int]) -> npt.NDArray[np.float32]: ...
    def teacher_forced_logits(self, ids: Sequence[int], prefill: int = 1) -> npt.NDArray[np.float32]: ...
    def greedy(self, ids: Sequence[int], n: int) -> list[int]: ...
