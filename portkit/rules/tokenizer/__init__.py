"""PK5xx: the ids a candle program feeds its model, against the ids transformers 5 feeds.

A candle program loads tokenizer.json with the `tokenizers` crate (0.22.2, candle-core 0.11.0's
dependency) and encodes with every part of it; transformers 5 picks the class tokenizer_config.json
names and, for many classes, rebuilds the normalizer, pre-tokenizer and decoder in Python. These
rules read both (`portkit.semantics.tokenizer`) and name each difference, the texts it changes and
where each side's behaviour comes from. Then where generation stops (eos ids), and what
`generate()` applies that a candle loop does not (a template's BOS, sampling defaults).

Lint never runs the crate or transformers; `portkit verify` encodes a corpus on both sides and
confirms each finding from the ids.

One rule per module (`portkit.rules.tokenizer.<rule name>`, the class docstring its
documentation); what they share is in `analysis` (both readings of the files and the chat
template, computed once per lint context) and `base` (`TokenizerRule`, and the two kinds of rule:
a part of the pipeline transformers rebuilds, `RebuiltPart`, and a chat-template construct,
`ChatTemplateRule`). A rule whose finding `portkit fix` can write into tokenizer.json says what
it writes (`TokenizerRule.tokenizer_changes`) and, when nothing fixes it, why (`refusal`).
"""

from __future__ import annotations

from portkit.rules.tokenizer.chat_template_block_whitespace import ChatTemplateBlockWhitespace
from portkit.rules.tokenizer.chat_template_generation_tag import ChatTemplateGenerationTag
from portkit.rules.tokenizer.chat_template_loop_control import ChatTemplateLoopControl
from portkit.rules.tokenizer.chat_template_negative_step import ChatTemplateNegativeStep
from portkit.rules.tokenizer.chat_template_python_method import ChatTemplatePythonMethod
from portkit.rules.tokenizer.chat_template_strftime_now import ChatTemplateStrftimeNow
from portkit.rules.tokenizer.chat_template_tojson import ChatTemplateTojson
from portkit.rules.tokenizer.chat_template_writes_bos import ChatTemplateWritesBos
from portkit.rules.tokenizer.decoder_rebuilt_by_class import DecoderRebuiltByClass
from portkit.rules.tokenizer.eos_stop_set_beyond_tokenizer_eos import EosStopSetBeyondTokenizerEos
from portkit.rules.tokenizer.generation_sampling_defaults import GenerationSamplingDefaults
from portkit.rules.tokenizer.normalizer_rebuilt_by_class import NormalizerRebuiltByClass
from portkit.rules.tokenizer.padding_saved_in_tokenizer import PaddingSavedInTokenizer
from portkit.rules.tokenizer.post_processor_rebuilt_by_class import PostProcessorRebuiltByClass
from portkit.rules.tokenizer.pre_tokenizer_rebuilt_by_class import PreTokenizerRebuiltByClass
from portkit.rules.tokenizer.prefix_space_after_special_token import PrependSchemeAfterSpecialToken
from portkit.rules.tokenizer.special_token_decoded_normalized import SpecialTokenDecodedNormalized
from portkit.rules.tokenizer.special_token_normalized import SpecialTokenNormalized
from portkit.rules.tokenizer.tokenizer_refused_by_crate import TokenizerRefusedByCrate

RULES = (
    NormalizerRebuiltByClass,
    PrependSchemeAfterSpecialToken,
    PreTokenizerRebuiltByClass,
    DecoderRebuiltByClass,
    SpecialTokenNormalized,
    PaddingSavedInTokenizer,
    TokenizerRefusedByCrate,
    EosStopSetBeyondTokenizerEos,
    ChatTemplateWritesBos,
    GenerationSamplingDefaults,
    PostProcessorRebuiltByClass,
    ChatTemplatePythonMethod,
    ChatTemplateGenerationTag,
    ChatTemplateLoopControl,
    ChatTemplateNegativeStep,
    ChatTemplateTojson,
    ChatTemplateStrftimeNow,
    ChatTemplateBlockWhitespace,
    SpecialTokenDecodedNormalized,
)
