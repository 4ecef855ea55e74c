"""Pure functions from config (and GGUF metadata) to effective values, one view per runtime.

- `transformers_view(config, generation_config)`: what transformers 5 computes with.
- `candle_view(config_text_or_value)`: what candle 0.11.0 `models::llama` computes with,
  including whether (and why) its serde parse refuses the config.
- `gguf_view(gguf_file)`: what candle 0.11.0 `models::quantized_llama` reads from GGUF metadata.

Rules compare these views; they never look at raw JSON for values.
"""

from portkit.semantics.candle import CandleView, candle_view
from portkit.semantics.gguf import GgufView, gguf_view
from portkit.semantics.transformers import TransformersView, transformers_view

__all__ = [
    "CandleView",
    "GgufView",
    "TransformersView",
    "candle_view",
    "gguf_view",
    "transformers_view",
]
