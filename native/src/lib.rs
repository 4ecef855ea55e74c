//! portkit_native: candle 0.11.0's own code, driven from Python.
//!
//! The core (`config`, `llama`, `llama_copy`, `gguf`) is plain Rust and tested with
//! `cargo test --no-default-features`; `python` is the thin pyo3 layer.

pub mod config;
pub mod device;
pub mod failure;
pub mod gguf;
pub mod llama;
pub mod llama_copy;
#[cfg(feature = "python")]
mod python;
