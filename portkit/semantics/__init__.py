"""Pure functions from config (and GGUF metadata) to effective values, one view per runtime.

- `family_transformers_view(family, config, generation_config)`: what transformers 5 computes
  with for a config of one candle family, and whether it accepts the config at all.
- `gguf_view(gguf_file)`: what candle 0.11.0 `models::quantized_llama` reads from GGUF metadata.

What each candle module makes of a config.json is its family's view (`portkit.families`:
`Family.view`), built from the family module's serde mirror with `portkit.semantics.serde`.
Rules compare these views; they never look at raw JSON for values.
"""

from portkit.semantics.gguf import GgufView, gguf_view
from portkit.semantics.transformers import FamilyTransformersView, family_transformers_view

__all__ = [
    "FamilyTransformersView",
    "GgufView",
    "family_transformers_view",
    "gguf_view",
]
