"""candle's own code (the wheel: 0.11.1; `build_info()["candle_version"]` says which), driven from Python:
each decoder family's and encoder module's config parse, runner and weight requests, per-layer capture
where a proven copy of the forward exists, the GGUF loaders, the `tokenizers` crate candle-core depends
on, and chat templates rendered as candle-examples and mistral.rs render them (minijinja).

The compiled module is private (`portkit_native._native`); this package re-exports an explicit list.
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import _cpu, _target

_cpu.check(_target.ARCH, _target.FEATURES)  # before the extension: a CPU it cannot run on gets one line, not SIGILL

from . import _native  # noqa: E402
from ._native import (  # noqa: E402  # after the CPU check above
    CandleError,
    CandlePanic,
    ChatTemplateError,
    ConfigError,
    DeviceUnavailableError,
    EncoderRunner,
    FamilyRunner,
    GgufRunner,
    LlamaRunner,
    NativeError,
    Tokenizer,
    TokenizerError,
    build_info,
    capture_families,
    capture_layers,
    chat_environments,
    check_device,
    cpu_threads,
    encoder_capture_families,
    encoder_families,
    families,
    gguf_capture_loaders,
    gguf_loaders,
    keep_weights,
    kept_tensors,
    release_memory,
    requested_tensors,
    sampling_weights,
)


def _pin_cpu_threads() -> None:
    """candle-core (0.11.0 and 0.11.1 alike) asks for its thread count on every CPU matmul (cpu_backend/mod.rs:1409,
    utils.rs:343-346), and unless RAYON_NUM_THREADS is set that reads and parses /proc/cpuinfo
    (num_cpus-1.17.0 src/linux.rs:59-60, `get_physical`): 0.5-0.9 s of CPU in one `portkit verify
    A B C` of 135M checkpoints on 2 cores, and the file grows with the cores. Set to the count
    candle computes, once: the same threads, the same sums; a value the user set stays."""
    if not os.environ.get("RAYON_NUM_THREADS"):
        os.environ["RAYON_NUM_THREADS"] = str(_native.cpu_threads())


_pin_cpu_threads()

__all__ = [
    "CandleError",
    "CandlePanic",
    "ChatTemplateError",
    "ConfigError",
    "DeviceUnavailableError",
    "EncoderRunner",
    "FamilyRunner",
    "GgufRunner",
    "LlamaRunner",
    "NativeError",
    "Tokenizer",
    "TokenizerError",
    "build_info",
    "candle_config",
    "capture_families",
    "encoder_capture_families",
    "capture_layers",
    "chat_environments",
    "check_device",
    "cpu_threads",
    "encoder_config",
    "encoder_families",
    "families",
    "gguf_capture_loaders",
    "gguf_loaders",
    "release_memory",
    "keep_weights",
    "kept_tensors",
    "render_chat_template",
    "requested_tensors",
    "sampling_weights",
]


def candle_config(config_json: str, family: str = "llama") -> dict[str, Any]:
    """`family`'s serde `Config` parse (llama and granite: plus `into_config(false)`), as its effective values.

    Raises `ConfigError` carrying serde_json's message unchanged when candle refuses the JSON, and
    ValueError for a family this wheel does not know.
    """
    return json.loads(_native.candle_config_json(config_json, family))


def encoder_config(config_json: str, family: str) -> dict[str, Any]:
    """The encoder module `family`'s serde `Config` parse (`encoder_families()`), as candle holds it.

    Raises `ConfigError` carrying serde_json's message unchanged when candle refuses the JSON.
    """
    return json.loads(_native.encoder_config_json(config_json, family))


def render_chat_template(
    environment: str,
    template: str,
    messages: list[dict[str, Any]],
    *,
    add_generation_prompt: bool = False,
    tools: list[dict[str, Any]] | None = None,
    bos_token: str | None = None,
    eos_token: str | None = None,
    unk_token: str | None = None,
    trim_blocks: bool | None = None,
    lstrip_blocks: bool | None = None,
) -> str:
    """`messages` (and `tools`) rendered through `template` the way `environment` renders them:
    "candle-examples" (candle's candle-examples-0.11.0/src/chat_template.rs) or "mistral.rs"
    (mistralrs-core's `apply_chat_template_to`), on minijinja 2.14.0. The special tokens are
    tokenizer_config.json's (None when it has none); `trim_blocks`/`lstrip_blocks` replace the
    environment's own settings (a counterfactual).

    Raises `ChatTemplateError` with the program's own text when it refuses the template,
    ValueError for a conversation the program cannot be given (candle-examples' `Message` holds
    role and content strings only), NotImplementedError for what portkit does not reproduce.
    """
    request = {
        "messages": messages,
        "add_generation_prompt": add_generation_prompt,
        "tools": tools,
        "bos_token": bos_token,
        "eos_token": eos_token,
        "unk_token": unk_token,
    }
    return _native.render_chat_template(
        environment, template, json.dumps(request, ensure_ascii=False), trim_blocks, lstrip_blocks
    )
