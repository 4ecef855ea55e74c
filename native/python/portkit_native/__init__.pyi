"""Type stubs for portkit_native: candle's decoder families, GGUF loaders and tokenizer, from Python."""

from collections.abc import Sequence
from os import PathLike
from typing import Any

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

class TokenizerError(NativeError):
    """The tokenizers crate (the built candle-core's: 0.23.2 in the wheel) refused a tokenizer.json or an encode; the
    message is the crate's, unchanged."""

class ChatTemplateError(NativeError):
    """A chat-template environment (minijinja 2.14.0, set up as candle-examples or mistral.rs sets it
    up) refused the template; the message is the program's, unchanged."""

def chat_environments() -> list[str]:
    """The chat-template environments `render_chat_template` knows: candle-examples, mistral.rs."""

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
    """The conversation rendered through `template` as `environment` renders it (candle-examples'
    chat_template.rs, or mistral.rs's `apply_chat_template_to`, on minijinja 2.14.0). Raises
    ChatTemplateError (the program's text) when it refuses the template, ValueError for a
    conversation the program cannot be given, NotImplementedError for what portkit does not
    reproduce."""

def candle_config(config_json: str, family: str = "llama") -> dict[str, Any]:
    """`family`'s serde `Config` parse, as effective values by candle's field names.

    llama: `LlamaConfig` + `into_config(false)`: hidden_size, intermediate_size, vocab_size,
    num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim (hidden_size //
    num_attention_heads), rms_norm_eps, rope_theta, bos_token_id, eos_token_id (None | int |
    list[int]), rope_scaling (None | dict), max_position_embeddings, tie_word_embeddings,
    use_flash_attn. granite: `GraniteConfig` + `into_config(false)`. Every other family: its
    `Config`'s fields (mixtral, stable_lm, starcoder2: read from candle's Debug text, their fields
    being private). Activations by the name candle's serde reads ("silu", "gelu_pytorch_tanh"),
    Option as None, plus "head_dim" where candle derives it. Raises ConfigError (serde's text,
    unchanged) or ValueError for an unknown family."""

def families() -> list[str]:
    """The family keys this wheel has a config binding and a runner for (candle module names)."""

def sampling_weights(
    logits: np.ndarray,
    contexts: list[list[int]],
    sampling: str,
    *,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    repeat_penalty: float = 1.0,
    repeat_last_n: int = 64,
    top_k_renormalised: int | None = None,
    seed: int = 299792458,
) -> np.ndarray:
    """The unnormalised weights candle's sampler draws each step's token from, [steps, vocab] f32.

    `logits` [steps, vocab] f32; `contexts[k]`: every token before step k, the prompt's included.
    `sampling`: "new" (`LogitsProcessor::new(seed, temperature, top_p)`) or a `Sampling` variant
    by name (ArgMax, All, TopK, TopP, TopKThenTopP, GumbelSoftmax) with the parameters it takes.
    `repeat_penalty` != 1: candle-transformers' `apply_repeat_penalty` over the last
    `repeat_last_n` tokens first; `top_k_renormalised`: `sample_f` with a closure that keeps the
    top k and renormalises. Computed by candle-transformers' `LogitsProcessor` text
    (native/src/generation_copy.rs), which records the weights it draws from. ValueError for a
    variant without its parameters or an unknown one.
    """

def encoder_capture_families() -> list[str]:
    """The encoders whose layers and sub-layers a copy proven bit-identical to the library records."""

def capture_families() -> list[str]:
    """The families whose per-layer capture comes from a copy proven bit-identical to the library."""

def gguf_loaders() -> list[str]:
    """The GGUF loader keys `GgufRunner` accepts."""

def gguf_capture_loaders() -> list[str]:
    """The GGUF loaders whose `GgufRunner.capture` exists (a copy proven bit-identical to the library)."""

def requested_tensors(
    family: str, config_json: str, available: Sequence[str] | None = None
) -> tuple[list[tuple[str, list[int] | None]], str | None]:
    """What `family`'s model asks its VarBuilder for while it is built: (name, shape) in request
    order, first request of each name only, and candle's error text (or caught panic) if building
    stopped, else None. `available` (tensor names, e.g. a checkpoint's header) answers
    `contains_tensor` and makes a request for any other name fail as candle's loader does; None
    means every name is present. The model is built from zeros: tiny configs only."""

def build_info() -> dict[str, Any]:
    """candle version and the devices compiled into this wheel."""

def check_device(device: str) -> None:
    """Raises DeviceUnavailableError (ValueError for an unknown name) unless `device` can be used."""

def cpu_threads() -> int:
    """How many threads candle's CPU kernels split work into (candle_core::utils::get_num_threads)."""

def keep_weights(files: list[str] | None) -> None:
    """While set, the runners that load exactly these weight files share one set of loaded
    tensors (a run on a patched config reuses the tensors of the run before it); None drops them."""

def kept_tensors() -> int:
    """How many loaded tensors `keep_weights` holds now (0 before a runner on its files loads)."""

def release_memory() -> bool:
    """Hands the heap's free memory back to the OS (glibc's `malloc_trim`; False where there is
    none). A dropped runner's weights otherwise stay in RSS: glibc keeps freed blocks under its
    mmap threshold (at most 32 MiB) in the heap."""

def capture_layers(
    weight_files: Sequence[str | PathLike[str]],
    config_json: str,
    ids: Sequence[int],
    dtype: str = "f32",
    cache_dtype: str | None = None,
    device: str = "cpu",
    family: str = "llama",
) -> dict[str, npt.NDArray[np.float32]]:
    """`LlamaRunner.capture` (or `FamilyRunner.capture`) without a runner alive: loads only the
    family's copy of the forward, so the weights are resident once. Same names and shapes as
    `LlamaRunner.capture`. NotImplementedError "per-layer: not available for FAMILY" for a family
    outside `capture_families()`. A runner's `capture` reuses its loaded tensors instead."""

class LlamaRunner:
    """`candle_transformers::models::llama::Llama`, loaded as a candle user would:
    `VarBuilder::from_mmaped_safetensors(weight_files, dtype, device)` (the same values; each
    tensor loaded once and its mapped pages released) and `Llama::load` with the
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
    def generate(self, ids: Sequence[int], n: int) -> tuple[list[int], npt.NDArray[np.float32]]:
        """(n greedy token ids, [max(n, 1), vocab] logits): `greedy(ids, n)` and
        `teacher_forced_logits(ids + tokens[:n - 1], len(ids))` in one pass, bit for bit."""
    def forced_and_greedy(self, ids: Sequence[int], prefill: int, n: int) -> tuple[list[int], npt.NDArray[np.float32]]:
        """(`greedy(ids[:prefill], n)`, `teacher_forced_logits(ids, prefill)`), bit for bit, with
        the forwards they share run once (the KV cache copied where candle's own pick forks)."""
    def capture(self, ids: Sequence[int]) -> dict[str, npt.NDArray[np.float32]]:
        """Per-layer values from a copy of the forward proven bit-identical to the library,
        built from this runner's tensors (no second load):
        "embeddings", "layer.0".., "norm" (each [len(ids), hidden]) and "logits" ([vocab])."""
    def continuation(
        self, prompt: Sequence[int], fed: Sequence[int], segment: Sequence[int]
    ) -> npt.NDArray[np.float32]:
        """[len(segment), vocab]: the prompt in one forward, `fed` one token at a time, then row
        k - 1 is the last position of `forward(segment[:k], len(prompt) + len(fed))` on that warm
        KV cache (a second turn, as chat programs feed it)."""
    def batch_last_logits(self, rows: Sequence[Sequence[int]]) -> npt.NDArray[np.float32]:
        """[N, vocab]: N rows of equal length in one `(N, seq_len)` forward from an empty
        cache, each row's last position."""

def encoder_families() -> list[str]:
    """The candle encoder modules `EncoderRunner` and `encoder_config` take."""

def encoder_config(config_json: str, family: str) -> dict[str, Any]:
    """The encoder module's serde `Config` parse, as candle holds it; ConfigError on refusal."""

class EncoderRunner:
    """candle's own encoder module for `family` (`BertModel::load`, `DistilBertModel::load`,
    `XLMRobertaModel::new`, `ModernBert::load`, jina_bert's `BertModel::new`, `NomicBertModel::load`)
    over the checkpoint's safetensors."""

    def __init__(
        self,
        family: str,
        weight_files: Sequence[str | PathLike[str]],
        config_json: str,
        dtype: str = "f32",
        device: str = "cpu",
    ) -> None: ...
    @property
    def family(self) -> str: ...
    def config_json(self) -> str:
        """candle's parsed config, as JSON (as `encoder_config`)."""
    def hidden_states(
        self,
        ids: Sequence[Sequence[int]],
        type_ids: Sequence[Sequence[int]] | None = None,
        mask: Sequence[Sequence[int]] | None = None,
    ) -> npt.NDArray[np.float32]:
        """[rows, seq, hidden]: the module's public forward on rows of one length. `mask` goes to the
        module as given, in its own convention (distilbert: 1 = masked); None: its call without one
        (a mask of ones where its forward requires one; jina_bert's forward takes none)."""
    def capture(
        self,
        ids: Sequence[Sequence[int]],
        type_ids: Sequence[Sequence[int]] | None = None,
        mask: Sequence[Sequence[int]] | None = None,
    ) -> dict[str, npt.NDArray[np.float32]]:
        """The same inputs through the capture copy: `embeddings`, each `layers.N.<sub-layer>` and
        `layers.N` ([rows, seq, hidden] each); ValueError for an encoder outside
        `encoder_capture_families()`."""

class FamilyRunner:
    """candle's own model for `family` (`Model::new` / `ModelForCausalLM::new`, `Llama::load`,
    `Granite::load`), over `VarBuilder::from_mmaped_safetensors(weight_files, dtype, device)` (as
    `LlamaRunner`) and
    the config parsed from `config_json`. `use_flash_attn` arguments get false. Each call starts
    from an empty KV cache (mixtral and stable_lm, which cannot clear theirs, are rebuilt)."""

    def __init__(
        self,
        family: str,
        weight_files: Sequence[str | PathLike[str]],
        config_json: str,
        dtype: str = "f32",
        device: str = "cpu",
        cache_dtype: str | None = None,
    ) -> None: ...
    @property
    def family(self) -> str: ...
    def config_json(self) -> str:
        """candle's effective config for this runner, as JSON (as `candle_config`)."""
    def last_logits(self, ids: Sequence[int]) -> npt.NDArray[np.float32]:
        """[vocab] logits of the last position, from the library's forward."""
    def teacher_forced_logits(self, ids: Sequence[int], prefill: int = 1) -> npt.NDArray[np.float32]:
        """As `LlamaRunner.teacher_forced_logits`."""
    def greedy(self, ids: Sequence[int], n: int) -> list[int]:
        """n greedily decoded token ids after `ids`, with the KV cache."""
    def generate(self, ids: Sequence[int], n: int) -> tuple[list[int], npt.NDArray[np.float32]]:
        """As `LlamaRunner.generate`."""
    def capture(self, ids: Sequence[int]) -> dict[str, npt.NDArray[np.float32]]:
        """As `LlamaRunner.capture`, for the families in `capture_families()`; NotImplementedError
        "per-layer: not available for FAMILY" for the others."""
    def continuation(
        self, prompt: Sequence[int], fed: Sequence[int], segment: Sequence[int]
    ) -> npt.NDArray[np.float32]:
        """As `LlamaRunner.continuation`, through the family's library model."""
    def batch_last_logits(self, rows: Sequence[Sequence[int]]) -> npt.NDArray[np.float32]:
        """As `LlamaRunner.batch_last_logits`."""
    def padded_batch_logits(self, rows: Sequence[Sequence[int]]) -> npt.NDArray[np.float32]:
        """[N, L, vocab]: the rows through the module's forward that takes a padding mask (all
        ones), every position; only qwen2 has one (`qwen2::Model::forward(.., Some(attn_mask))`),
        NotImplementedError for the other families."""

class GgufRunner:
    """`ModelWeights::from_gguf` of candle's GGUF loader `loader` (one of `gguf_loaders()`) on a GGUF file."""

    def __init__(self, path: str | PathLike[str], device: str = "cpu", loader: str = "quantized_llama") -> None: ...
    @property
    def loader(self) -> str: ...
    def last_logits(self, ids: Sequence[int]) -> npt.NDArray[np.float32]: ...
    def teacher_forced_logits(self, ids: Sequence[int], prefill: int = 1) -> npt.NDArray[np.float32]: ...
    def greedy(self, ids: Sequence[int], n: int) -> list[int]: ...
    def forced_and_greedy(self, ids: Sequence[int], prefill: int, n: int) -> tuple[list[int], npt.NDArray[np.float32]]:
        """(`greedy(ids[:prefill], n)`, `teacher_forced_logits(ids, prefill)`), bit for bit, with
        the forwards they share run once."""
    def capture(self, ids: Sequence[int]) -> dict[str, npt.NDArray[np.float32]]:
        """Per-layer values (embeddings, `layer.N` and its sub-layers, norm, logits) through the
        loader's copy of the forward (`gguf_capture_loaders()`)."""
    def continuation(
        self, prompt: Sequence[int], fed: Sequence[int], segment: Sequence[int]
    ) -> npt.NDArray[np.float32]:
        """As `LlamaRunner.continuation`, through the loader's `ModelWeights::forward`."""
    def batch_last_logits(self, rows: Sequence[Sequence[int]]) -> npt.NDArray[np.float32]:
        """As `LlamaRunner.batch_last_logits`."""

class Tokenizer:
    """The Rust `tokenizers` crate at the version the built candle-core resolves (0.23.2, `fancy-regex`, in the wheel),
    reading a tokenizer.json literally, as a candle program does (`Tokenizer::from_file`, then
    `encode(text, add_special_tokens)`): every part of the file applies, padding and truncation
    included; tokenizer_config.json is never read."""

    @staticmethod
    def from_file(path: str | PathLike[str]) -> Tokenizer:
        """`Tokenizer::from_file`. FileNotFoundError for a missing file; TokenizerError with the
        crate's message unchanged (serde_json's "... at line L column C") for one it refuses."""
    @staticmethod
    def from_str(json: str) -> Tokenizer:
        """`Tokenizer::from_str` on the text of a tokenizer.json; errors as `from_file`."""
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """`encode(text, add_special_tokens).get_ids()`: the ids a candle program feeds its model."""
    def encode_pieces(self, text: str, add_special_tokens: bool = True) -> tuple[list[int], list[str]]:
        """(`get_ids()`, `get_tokens()`) of one encode."""
    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """`decode(ids, skip_special_tokens)`."""
    def token_to_id(self, token: str) -> int | None: ...
    def id_to_token(self, id: int) -> str | None: ...
    def vocab_size(self, with_added_tokens: bool = True) -> int:
        """`get_vocab_size(with_added_tokens)`."""
