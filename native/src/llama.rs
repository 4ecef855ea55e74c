//! A runner over the library's `candle_transformers::models::llama::Llama`, exactly as a candle
//! user would load it: `LlamaConfig` serde, `VarBuilder::from_mmaped_safetensors` (through
//! `weights::shared_weights`: same values, weights resident once), `Llama::load`, `Cache::new`,
//! `Llama::forward`.

use crate::array::Array;
use crate::config;
use crate::failure::{guarded, Failure, Outcome};
use crate::llama_copy::LlamaCopy;
use crate::weights::shared_weights;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Config, Llama};
use std::path::PathBuf;

pub struct LlamaRunner {
    pub(crate) model: Llama,
    config: Config,
    /// Kept for `capture`: the copy of the forward is built from the same loaded tensors.
    vb: VarBuilder<'static>,
    cache_dtype: DType,
    pub(crate) device: Device,
}

pub fn ids_tensor(ids: &[u32], device: &Device) -> Outcome<Tensor> {
    if ids.is_empty() {
        return Err(Failure::Invalid("the prompt has no token ids".into()));
    }
    Ok(Tensor::new(ids, device)?.unsqueeze(0)?)
}

/// The greedy loop of `generate`: `first` is the prefill's row, `step(id, pos)` feeds one token.
pub fn generate_rows(first: Vec<f32>, start: usize, n: usize, mut step: impl FnMut(u32, usize) -> Outcome<Vec<f32>>) -> Outcome<(Vec<u32>, Array)> {
    let vocab = first.len();
    let mut data = first;
    let mut tokens = Vec::with_capacity(n);
    while tokens.len() < n {
        let next = argmax(&data[data.len() - vocab..]);
        tokens.push(next);
        if tokens.len() < n {
            data.extend(step(next, start + tokens.len() - 1)?);
        }
    }
    Ok((tokens, Array { shape: vec![data.len() / vocab.max(1), vocab], data }))
}

/// argmax of a 1-D logits row; ties go to the lowest index, as candle's and torch's argmax do.
pub fn argmax(row: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}

impl LlamaRunner {
    pub fn load(
        weight_files: Vec<PathBuf>,
        config_json: &str,
        dtype: DType,
        cache_dtype: Option<DType>,
        device: Device,
        use_flash_attn: bool,
    ) -> Outcome<Self> {
        let config = config::parse(config_json, use_flash_attn)?;
        for f in &weight_files {
            if !f.is_file() {
                return Err(Failure::NotFound(format!("weight file not found: {}", f.display())));
            }
        }
        guarded(|| {
            let vb = shared_weights(&weight_files, dtype, &device)?;
            let model = Llama::load(vb.clone(), &config)?;
            Ok(Self {
                model,
                config: config.clone(),
                vb,
                cache_dtype: cache_dtype.unwrap_or(dtype),
                device: device.clone(),
            })
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub(crate) fn new_cache(&self) -> Outcome<Cache> {
        Ok(Cache::new(true, self.cache_dtype, &self.config, &self.device)?)
    }

    pub(crate) fn forward_row(&self, ids: &[u32], index_pos: usize, cache: &mut Cache) -> Outcome<Vec<f32>> {
        let x = ids_tensor(ids, &self.device)?;
        let logits = self.model.forward(&x, index_pos, cache)?;
        Ok(logits.squeeze(0)?.to_vec1::<f32>()?)
    }

    /// Last-position logits of one forward over `ids`, through the library's `Llama::forward`.
    pub fn last_logits(&self, ids: &[u32]) -> Outcome<Vec<f32>> {
        guarded(|| {
            let mut cache = self.new_cache()?;
            self.forward_row(ids, 0, &mut cache)
        })
    }

    /// Teacher forcing with the KV cache: prefill `ids[..prefill]`, then feed `ids[k]` one at a
    /// time. Row j holds the logits after `ids[..prefill + j]`: `ids.len() - prefill + 1` rows.
    pub fn teacher_forced_logits(&self, ids: &[u32], prefill: usize) -> Outcome<Array> {
        if prefill == 0 || prefill > ids.len() {
            return Err(Failure::Invalid(format!("prefill must be in 1..={}, got {prefill}", ids.len())));
        }
        guarded(|| {
            let mut cache = self.new_cache()?;
            let mut data = self.forward_row(&ids[..prefill], 0, &mut cache)?;
            let vocab = data.len();
            for (pos, &id) in ids.iter().enumerate().skip(prefill) {
                data.extend(self.forward_row(&[id], pos, &mut cache)?);
            }
            Ok(Array { shape: vec![ids.len() - prefill + 1, vocab], data })
        })
    }

    /// Greedy decoding that keeps every step's logits: `greedy(ids, n)` and then
    /// `teacher_forced_logits(ids + tokens[..n - 1], ids.len())` in one pass, since they run the
    /// same forwards in the same order. Rows: the prefill's last position, then one per fed token
    /// (`max(n, 1)` rows).
    pub fn generate(&self, ids: &[u32], n: usize) -> Outcome<(Vec<u32>, Array)> {
        guarded(|| {
            let mut cache = self.new_cache()?;
            let first = self.forward_row(ids, 0, &mut cache)?;
            generate_rows(first, ids.len(), n, |id, pos| self.forward_row(&[id], pos, &mut cache))
        })
    }

    /// Greedy decoding of `n` new tokens after `ids`, with the KV cache (no forward for `n == 0`).
    pub fn greedy(&self, ids: &[u32], n: usize) -> Outcome<Vec<u32>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        Ok(self.generate(ids, n)?.0)
    }

    /// Per-layer capture through the copy of the forward (`llama_copy`), built from the tensors
    /// this runner already loaded (no second load, no second copy): embeddings, layer.0.., norm,
    /// logits.
    pub fn capture(&self, ids: &[u32]) -> Outcome<Vec<(String, Array)>> {
        capture_with(self.vb.clone(), &self.config, ids, self.cache_dtype, &self.device)
    }
}

/// Per-layer capture through `llama_copy` built from `vb`.
pub fn capture_with(vb: VarBuilder<'static>, config: &Config, ids: &[u32], cache_dtype: DType, device: &Device) -> Outcome<Vec<(String, Array)>> {
    guarded(|| {
        let copy = LlamaCopy::load(vb, config, cache_dtype)?;
        copy.capture(&ids_tensor(ids, device)?)
    })
}
