//! A runner over `candle_transformers::models::quantized_llama::ModelWeights::from_gguf`,
//! which reads only the GGUF's metadata and tensors (never a config.json).

use crate::failure::{guarded, Failure, Outcome};
use crate::llama::{argmax, ids_tensor, Array};
use candle_core::quantized::gguf_file;
use candle_core::Device;
use candle_transformers::models::quantized_llama::ModelWeights;
use std::path::Path;

pub struct GgufRunner {
    model: ModelWeights,
    device: Device,
}

impl GgufRunner {
    pub fn load(path: &Path, device: Device) -> Outcome<Self> {
        if !path.is_file() {
            return Err(Failure::NotFound(format!("GGUF file not found: {}", path.display())));
        }
        guarded(|| {
            let mut file = std::fs::File::open(path).map_err(|e| Failure::Invalid(format!("{}: {e}", path.display())))?;
            let content = gguf_file::Content::read(&mut file).map_err(|e| e.with_path(path))?;
            let model = ModelWeights::from_gguf(content, &mut file, &device)?;
            Ok(Self { model, device: device.clone() })
        })
    }

    /// `forward(x, index_pos)` keeps its own KV cache and clears it when `index_pos == 0`.
    fn forward_row(&mut self, ids: &[u32], index_pos: usize) -> Outcome<Vec<f32>> {
        let x = ids_tensor(ids, &self.device)?;
        Ok(self.model.forward(&x, index_pos)?.squeeze(0)?.to_vec1::<f32>()?)
    }

    pub fn last_logits(&mut self, ids: &[u32]) -> Outcome<Vec<f32>> {
        guarded(|| self.forward_row(ids, 0))
    }

    /// Same row layout as `LlamaRunner::teacher_forced_logits`.
    pub fn teacher_forced_logits(&mut self, ids: &[u32], prefill: usize) -> Outcome<Array> {
        if prefill == 0 || prefill > ids.len() {
            return Err(Failure::Invalid(format!("prefill must be in 1..={}, got {prefill}", ids.len())));
        }
        guarded(|| {
            let mut data = self.forward_row(&ids[..prefill], 0)?;
            let vocab = data.len();
            for (pos, &id) in ids.iter().enumerate().skip(prefill) {
                data.extend(self.forward_row(&[id], pos)?);
            }
            Ok(Array { shape: vec![ids.len() - prefill + 1, vocab], data })
        })
    }

    pub fn greedy(&mut self, ids: &[u32], n: usize) -> Outcome<Vec<u32>> {
        guarded(|| {
            let mut out = Vec::with_capacity(n);
            if n == 0 {
                return Ok(out);
            }
            let mut next = argmax(&self.forward_row(ids, 0)?);
            out.push(next);
            for pos in ids.len()..ids.len() + n - 1 {
                next = argmax(&self.forward_row(&[next], pos)?);
                out.push(next);
            }
            Ok(out)
        })
    }
}
