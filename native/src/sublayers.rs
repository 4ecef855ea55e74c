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
}

impl<'a> Sink<'a> {
    /// Records nothing: the library's own forward.
    pub fn off() -> Sink<'static> {
        Sink { out: None, layer: 0 }
    }

    /// Records decoder layer `layer`'s sub-layers into `out`.
    pub fn layer(out: &'a mut Vec<(String, Array)>, layer: usize) -> Self {
        Self { out: Some(out), layer }
    }

    /// `t` ([1, T, features]) as `layer.N.<path>` [T, features], F32.
    pub fn put(&mut self, path: &str, t: &Tensor) -> Result<()> {
        if let Some(out) = self.out.as_deref_mut() {
            let t = t.squeeze(0)?.to_dtype(DType::F32)?;
            let shape = t.dims().to_vec();
            out.push((format!("layer.{}.{path}", self.layer), Array { shape, data: t.flatten_all()?.to_vec1::<f32>()? }));
        }
        Ok(())
    }
}
