"""PK4xx: GGUF files as candle 0.11.0's GGUF loaders read them.

Each file goes to the loader its `general.architecture` names in `portkit.families.GGUF_LOADERS`
(quantized_llama for an architecture candle has no loader for); each rule lists the loaders it
speaks about (`loaders`) and sees only their files. GGUF rules apply to every model family: the
file's architecture, not config.json's `model_type`, decides how candle reads it.

The rules every loader shares are sorted by what they read (`metadata`, `tensors`); a rule only
one loader has lives in that loader's module (`quantized_phi3`, `quantized_phi`, ...).
"""

from __future__ import annotations

from portkit.rules.gguf.against_config import GgufConfigDisagreement
from portkit.rules.gguf.metadata import (
    ContextOverMaxSeqLen,
    GgufFreqBaseDefaulted,
    HeadDimNotEmbeddingOverHeads,
    MissingGgufMetadata,
    NonLlamaArchitecture,
    RopeFreqsIgnored,
    RopePairingByArchitecture,
)
from portkit.rules.gguf.quantized_gemma3 import (
    Gemma3GgufLocalFreqBaseKey,
    Gemma3GgufMlpSilu,
    Gemma3GgufSlidingWindow,
)
from portkit.rules.gguf.quantized_glm4 import Glm4GgufRotaryDimIgnored
from portkit.rules.gguf.quantized_llama import MixtralGgufMergedExperts
from portkit.rules.gguf.quantized_phi import Phi2GgufQkvRows, Phi2GgufRopeBaseIgnored, Phi2GgufSplitQkv
from portkit.rules.gguf.quantized_phi3 import (
    Phi3GgufFreqBaseIgnored,
    Phi3GgufLongRopeIgnored,
    Phi3GgufMissingOutput,
    Phi3GgufPartialRotary,
)
from portkit.rules.gguf.quantized_qwen import Qwen2GgufMissingQkvBias, Qwen3GgufRopeTableF16
from portkit.rules.gguf.quantized_smollm3 import (
    SmolLm3GgufHeadDim,
    SmolLm3GgufNopeLayers,
    SmolLm3GgufOutputIgnored,
    SmolLm3GgufRequantized,
)
from portkit.rules.gguf.tensors import (
    MissingGgufTensor,
    QkRowsNotPermuted,
    UnsupportedGgufTensorType,
)

RULES = (
    MissingGgufMetadata,
    GgufFreqBaseDefaulted,
    RopePairingByArchitecture,
    RopeFreqsIgnored,
    ContextOverMaxSeqLen,
    HeadDimNotEmbeddingOverHeads,
    NonLlamaArchitecture,
    UnsupportedGgufTensorType,
    GgufConfigDisagreement,
    QkRowsNotPermuted,
    MissingGgufTensor,
    Qwen3GgufRopeTableF16,
    Gemma3GgufMlpSilu,
    Gemma3GgufLocalFreqBaseKey,
    Phi3GgufFreqBaseIgnored,
    Phi3GgufLongRopeIgnored,
    Phi3GgufMissingOutput,
    Qwen2GgufMissingQkvBias,
    MixtralGgufMergedExperts,
    Phi3GgufPartialRotary,
    Gemma3GgufSlidingWindow,
    Phi2GgufSplitQkv,
    Phi2GgufRopeBaseIgnored,
    Phi2GgufQkvRows,
    Glm4GgufRotaryDimIgnored,
    SmolLm3GgufHeadDim,
    SmolLm3GgufNopeLayers,
    SmolLm3GgufOutputIgnored,
    SmolLm3GgufRequantized,
)
