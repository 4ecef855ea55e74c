//! Sub-layer outputs, recorded while a copy of a family's forward runs: each submodule of the
//! decoder layer named by transformers' attribute path (`layer.N.self_attn.q_proj`, ...), as
//! `portkit reference` names them (portkit/families/sublayers.py).
//!
//! A `Sink` is threaded through the copy's decoder layer and attention: `put` copies a tensor
//! the forward already computed and changes no op, so the forward with a sink is the forward
//! without one (tests/copy_matches_library.rs and tests/families.rs hold the capture's logits
//! equal to the library's bit for bit, sub-layers recorded).

use crate::array::Array;
use candle_core::{DType, Result, Tensor};

pub struct Sink<'a> {
    out: Option<&'a mut Vec<(String, Array)>>,
    layer: usize,
    rows: bool, // an encoder's batch: keep [rows, T, features] and name `layers.N.<path>`
}

impl<'a> Sink<'a> {
    /// Records nothing: the library's own forward.
    pub fn off() -> Sink<'static> {
        Sink { out: None, layer: 0, rows: false }
    }

    /// Records decoder layer `layer`'s sub-layers into `out`.
    pub fn layer(out: &'a mut Vec<(String, Array)>, layer: usize) -> Self {
        Self { out: Some(out), layer, rows: false }
    }

    /// Records encoder layer `layer`'s sub-layers into `out`, every row of the batch kept
    /// (transformers' `encoder.layer.N.<path>`, named `layers.N.<path>` as the embedding judge reads).
    pub fn encoder_layer(out: &'a mut Vec<(String, Array)>, layer: usize) -> Self {
        Self { out: Some(out), layer, rows: true }
    }

    /// `t` ([1, T, features]) as `layer.N.<path>` [T, features], F32; for an encoder,
    /// [rows, T, features] as `layers.N.<path>`.
    pub fn put(&mut self, path: &str, t: &Tensor) -> Result<()> {
        if let Some(out) = self.out.as_deref_mut() {
            let (t, name) = match self.rows {
                true => (t.to_dtype(DType::F32)?, format!("layers.{}.{path}", self.layer)),
                false => (t.squeeze(0)?.to_dtype(DType::F32)?, format!("layer.{}.{path}", self.layer)),
            };
            let shape = t.dims().to_vec();
            out.push((name, Array { shape, data: t.flatten_all()?.to_vec1::<f32>()? }));
        }
        Ok(())
    }
}
