//! portkit_native: candle's own code (0.11.1 in the wheel, native/Cargo.toml), driven from Python.
//!
//! The core (`array`, `config`, `family`, `chat`, `llama`, the `*_copy` forwards, `gguf`, `requested`, `tokenizer`, `chat_template`) is plain
//! Rust and tested with `cargo test --no-default-features`; `python` is the thin pyo3 layer.

pub mod array;
pub mod bert_copy;
pub mod distilbert_copy;
pub mod modernbert_copy;
#[cfg(not(feature = "before-0-10-0"))] // models/nomic_bert.rs arrived in 0.10.0
pub mod nomic_bert_copy;
pub mod xlm_roberta_copy;
pub mod chat;
pub mod chat_template;
pub mod config;
pub mod debug_fields;
pub mod device;
pub mod encoder;
pub mod failure;
pub mod forced;
pub mod family;
pub mod gemma2_copy;
pub mod gemma3_copy;
#[cfg(not(feature = "before-0-11-0"))] // models/gemma4/ arrived in 0.11.0
pub mod gemma4_copy;
pub mod gemma_copy;
#[cfg(not(feature = "before-0-9-2"))] // models/glm4_new.rs arrived in 0.9.2
pub mod glm4_new_copy;
pub mod generation_copy;
pub mod gguf;
pub mod granite_copy;
pub mod llama;
pub mod llama_copy;
pub mod mistral_copy;
pub mod mixtral_copy;
#[cfg(not(feature = "before-0-9-2"))] // models/olmo2.rs arrived in 0.9.2
pub mod olmo2_copy;
pub mod phi3_copy;
pub mod phi_copy;
pub mod qwen2_copy;
pub mod qwen2_moe_copy;
pub mod quantized_gemma3_copy;
#[cfg(not(feature = "before-0-9-2"))] // models/qwen3.rs arrived in 0.9.2
pub mod qwen3_copy;
pub mod requested;
pub mod sampling;
#[cfg(not(feature = "before-0-9-2"))] // models/smol/smollm3.rs arrived in 0.9.2
pub mod smollm3_copy;
pub mod stdio;
pub mod sublayers;
pub mod tokenizer;
pub mod weights;
#[cfg(feature = "python")]
mod python;
