//! `Array`: what every runner and capture hands back to Python. Its own module so that the
//! generated capture copies (`*_copy.rs`, native/copies/) and `sublayers::Sink` depend on it,
//! not on the llama runner.

use crate::failure::Outcome;
use candle_core::{DType, Tensor};

/// Floats with their shape, row-major; the Python layer turns them into numpy arrays.
#[derive(Debug, Clone)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Array {
    pub fn from_tensor(t: &Tensor) -> Outcome<Self> {
        let t = t.to_dtype(DType::F32)?;
        Ok(Self { shape: t.dims().to_vec(), data: t.flatten_all()?.to_vec1::<f32>()? })
    }
}
