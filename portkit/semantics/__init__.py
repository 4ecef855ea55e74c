"""Pure functions from config (and GGUF metadata) to effective values, one view per runtime.

- `transformers_view(config, generation_config)`: what transformers 5 computes with.
- `gguf_view(gguf_file)`: what candle 0.11.0 `models::quantized_llama` reads from GGUF metadata.

What each candle module makes of a config.json is its family's view (`portkit.families`:
`Family.view`), built from the family module's serde mirror with `portkit.semantics.serde`.
Rules compare these views; they never look at raw JSON for values.
"""

from portkit.semantics.gguf import GgufView, gguf_view
from portkit.semantics.transformers import TransformersView, transformers_view

__all__ = [
    "GgufView",
    "TransformersView",
    "gguf_view",
    "transformers_view",
]
