//! The two ways chat programs and servers run candle that a single prompt never meets, each
//! through the library's own `forward(x, offset)`:
//!
//! - a continuation: the prompt prefilled, the answer fed one token at a time, then the next
//!   turn fed many tokens at once at the offset, on the same (warm) KV cache, as candle-examples'
//!   interactive modes do;
//! - a batch: N rows of equal length in one `(N, seq_len)` forward from an empty cache, as
//!   servers and embedding programs do (and, for qwen2, the padding-mask forward they call).

use crate::array::Array;
use crate::failure::{guarded, Failure, Outcome};
use crate::family::{FamilyRunner, Model, Parsed};
use crate::gguf::{GgufRunner, Weights};
use crate::llama::LlamaRunner;
use candle_core::{DType, Device, Module, Tensor};
use candle_transformers::models::{llama, qwen2};

/// A model with a KV cache that a continuation (and `forced::forced_and_greedy_rows`) can be run on.
pub(crate) trait Warm {
    type Snapshot;
    /// Empty cache, `prompt` in one forward at offset 0, then `fed` one token at a time.
    fn warm(&mut self, prompt: &[u32], fed: &[u32]) -> Outcome<()>;
    /// A copy of the model and its cache (None: the module's model cannot be copied).
    fn snapshot(&self) -> Option<Self::Snapshot>;
    fn restore(&mut self, snapshot: &Self::Snapshot);
    /// The library's forward of one row at `offset`: its last position's logits.
    fn step(&mut self, ids: &[u32], offset: usize) -> Outcome<Vec<f32>>;
}

/// Row k - 1 holds the last-position logits of `forward(segment[..k], offset)` on the cache
/// warmed with `prompt` and `fed` (offset = their length), for k = 1..=segment.len(): what a
/// program reads when the next turn ends at position k. Each k starts from the warm cache: a
/// copy of it where the module's model derives Clone (copies share tensors; the caches that
/// write into a preallocated buffer in place, candle-nn's KvCache and RotatingKvCache, rewrite
/// every slot a longer k reads, since k only grows), else the prompt and `fed` again.
fn continuation_rows<W: Warm>(w: &mut W, prompt: &[u32], fed: &[u32], segment: &[u32]) -> Outcome<Array> {
    if prompt.is_empty() || segment.is_empty() {
        return Err(Failure::Invalid("a continuation needs a prompt and a segment of at least one token".into()));
    }
    guarded(|| {
        w.warm(prompt, fed)?;
        let snapshot = w.snapshot();
        let offset = prompt.len() + fed.len();
        let mut data = Vec::new();
        for k in 1..=segment.len() {
            if k > 1 {
                match &snapshot {
                    Some(s) => w.restore(s),
                    None => w.warm(prompt, fed)?,
                }
            }
            data.extend(w.step(&segment[..k], offset)?);
        }
        let vocab = data.len() / segment.len();
        Ok(Array { shape: vec![segment.len(), vocab], data })
    })
}

/// The `(N, seq_len)` ids tensor of N rows of equal length.
fn batch_tensor(rows: &[Vec<u32>], device: &Device) -> Outcome<Tensor> {
    let len = rows.first().map_or(0, Vec::len);
    if len == 0 {
        return Err(Failure::Invalid("a batch needs at least one non-empty row".into()));
    }
    if let Some(r) = rows.iter().find(|r| r.len() != len) {
        return Err(Failure::Invalid(format!("a batch needs rows of equal length: {} and {}", len, r.len())));
    }
    let flat: Vec<u32> = rows.iter().flatten().copied().collect();
    Ok(Tensor::new(flat.as_slice(), device)?.reshape((rows.len(), len))?)
}

/// Logits of N rows (`[N, 1, vocab]`, `[N, vocab]` or `[N, L, vocab]`) as f32, row-major, with
/// `dims` (the vocabulary last).
fn logits_array(logits: &Tensor, dims: &[usize]) -> Outcome<Array> {
    let data = logits.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    let lead: usize = dims.iter().product();
    let vocab = data.len() / lead.max(1);
    let mut shape = dims.to_vec();
    shape.push(vocab);
    Ok(Array { shape, data })
}

impl Model {
    /// A copy of the library's model and its KV cache; None for stable_lm, whose `Model` is not
    /// Clone (stable_lm.rs:359).
    fn snapshot(&self) -> Option<Model> {
        Some(match self {
            Model::Llama { model, cache } => Model::Llama { model: model.clone(), cache: cache.clone() },
            Model::Granite { model, cache } => Model::Granite { model: model.clone(), cache: cache.clone() },
            Model::Mistral(m) => Model::Mistral(m.clone()),
            Model::Mixtral(m) => Model::Mixtral(m.clone()),
            Model::MixtralRepaired(m, c) => Model::MixtralRepaired(m.clone(), c.clone()),
            Model::Qwen2(m) => Model::Qwen2(m.clone()),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Qwen3(m) => Model::Qwen3(m.clone()),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Qwen3Moe(m) => Model::Qwen3Moe(m.clone()),
            Model::Gemma(m) => Model::Gemma(m.clone()),
            Model::Gemma2(m) => Model::Gemma2(m.clone()),
            Model::Gemma3(m) => Model::Gemma3(m.clone()),
            Model::Phi3(m) => Model::Phi3(m.clone()),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Olmo2(m) => Model::Olmo2(m.clone()),
            Model::Starcoder2(m) => Model::Starcoder2(m.clone()),
            Model::Phi(m) => Model::Phi(m.clone()),
            Model::Qwen2Moe(m) => Model::Qwen2Moe(m.clone()),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::SmolLm3(m) => Model::SmolLm3(m.clone()),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Glm4New(m) => Model::Glm4New(m.clone()),
            #[cfg(not(feature = "before-0-11-0"))]
            Model::Gemma4(m) => Model::Gemma4(m.clone()),
            Model::StableLm(_) => return None,
        })
    }
}

impl Warm for FamilyRunner {
    type Snapshot = Model;

    fn warm(&mut self, prompt: &[u32], fed: &[u32]) -> Outcome<()> {
        self.fresh()?;
        self.forward_row(prompt, 0)?;
        for (i, &id) in fed.iter().enumerate() {
            self.forward_row(&[id], prompt.len() + i)?;
        }
        Ok(())
    }

    fn snapshot(&self) -> Option<Model> {
        self.model.snapshot()
    }

    fn restore(&mut self, snapshot: &Model) {
        // Model is not Clone as a whole (stable_lm), but every snapshot is
        self.model = snapshot.snapshot().expect("a snapshot is a model that can be copied");
    }

    fn step(&mut self, ids: &[u32], offset: usize) -> Outcome<Vec<f32>> {
        self.forward_row(ids, offset)
    }
}

impl FamilyRunner {
    /// `continuation_rows` through the family's library model.
    pub fn continuation(&mut self, prompt: &[u32], fed: &[u32], segment: &[u32]) -> Outcome<Array> {
        continuation_rows(self, prompt, fed, segment)
    }

    /// `[N, vocab]`: one `forward(ids, 0)` of N rows of equal length from an empty cache, each
    /// row's last position.
    pub fn batch_last_logits(&mut self, rows: &[Vec<u32>]) -> Outcome<Array> {
        let x = batch_tensor(rows, &self.device)?;
        guarded(|| {
            self.fresh()?;
            let logits = self.model.forward(&x, 0)?;
            logits_array(&logits, &[rows.len()])
        })
    }

    /// `[N, L, vocab]`: the rows through the module's forward with a padding mask (all ones:
    /// equal-length rows, as a tokenizer's `attention_mask` gives them), every position. Only
    /// qwen2 has one: `qwen2::Model::forward(input_ids, 0, Some(attn_mask))` (qwen2.rs:340-356,
    /// the mask from `prepare_attention_mask`, :326-338), with lm_head as
    /// `ModelForCausalLM::new` builds it (qwen2.rs:379-384), on the tensors this runner loaded.
    pub fn padded_batch_logits(&mut self, rows: &[Vec<u32>]) -> Outcome<Array> {
        let x = batch_tensor(rows, &self.device)?;
        let Parsed::Qwen2(cfg) = &self.parsed else {
            return Err(Failure::NotImplemented(format!(
                "candle's `{}` has no forward that takes a padding mask",
                self.family().key()
            )));
        };
        let (vb, device) = (self.vb.clone(), self.device.clone());
        guarded(|| {
            let mut base = qwen2::Model::new(cfg, vb.clone())?;
            let lm_head = if vb.contains_tensor("lm_head.weight") {
                candle_nn::linear_no_bias(cfg.hidden_size, cfg.vocab_size, vb.pp("lm_head"))?
            } else {
                let embed = vb.pp("model.embed_tokens").get((cfg.vocab_size, cfg.hidden_size), "weight")?;
                candle_nn::Linear::new(embed, None)
            };
            let (n, len) = x.dims2()?;
            let mask = Tensor::ones((n, len), DType::U32, &device)?;
            let hidden = base.forward(&x, 0, Some(&mask))?;
            logits_array(&lm_head.forward(&hidden)?, &[n, len])
        })
    }
}

/// `LlamaRunner` with the KV cache it keeps outside the model.
pub(crate) struct LlamaTurn<'a> {
    pub(crate) runner: &'a LlamaRunner,
    pub(crate) cache: llama::Cache,
}

impl Warm for LlamaTurn<'_> {
    type Snapshot = llama::Cache;

    fn warm(&mut self, prompt: &[u32], fed: &[u32]) -> Outcome<()> {
        self.cache = self.runner.new_cache()?;
        self.runner.forward_row(prompt, 0, &mut self.cache)?;
        for (i, &id) in fed.iter().enumerate() {
            self.runner.forward_row(&[id], prompt.len() + i, &mut self.cache)?;
        }
        Ok(())
    }

    fn snapshot(&self) -> Option<llama::Cache> {
        Some(self.cache.clone())
    }

    fn restore(&mut self, snapshot: &llama::Cache) {
        self.cache = snapshot.clone();
    }

    fn step(&mut self, ids: &[u32], offset: usize) -> Outcome<Vec<f32>> {
        self.runner.forward_row(ids, offset, &mut self.cache)
    }
}

impl LlamaRunner {
    /// `continuation_rows` through `Llama::forward(x, index_pos, &mut cache)`.
    pub fn continuation(&self, prompt: &[u32], fed: &[u32], segment: &[u32]) -> Outcome<Array> {
        let cache = self.new_cache()?;
        continuation_rows(&mut LlamaTurn { runner: self, cache }, prompt, fed, segment)
    }

    /// `FamilyRunner::batch_last_logits` through `Llama::forward`.
    pub fn batch_last_logits(&self, rows: &[Vec<u32>]) -> Outcome<Array> {
        let x = batch_tensor(rows, &self.device)?;
        guarded(|| {
            let mut cache = self.new_cache()?;
            let logits = self.model.forward(&x, 0, &mut cache)?;
            logits_array(&logits, &[rows.len()])
        })
    }
}

impl Warm for GgufRunner {
    type Snapshot = Weights;

    fn warm(&mut self, prompt: &[u32], fed: &[u32]) -> Outcome<()> {
        // index_pos 0 starts every loader from an empty cache (`GgufRunner::forward`)
        self.forward_row(prompt, 0)?;
        for (i, &id) in fed.iter().enumerate() {
            self.forward_row(&[id], prompt.len() + i)?;
        }
        Ok(())
    }

    fn snapshot(&self) -> Option<Weights> {
        self.model.snapshot()
    }

    fn restore(&mut self, snapshot: &Weights) {
        self.model = snapshot.snapshot().expect("a snapshot is a model that can be copied");
    }

    fn step(&mut self, ids: &[u32], offset: usize) -> Outcome<Vec<f32>> {
        self.forward_row(ids, offset)
    }
}

impl GgufRunner {
    /// `continuation_rows` through the loader's `ModelWeights::forward(x, index_pos)`.
    pub fn continuation(&mut self, prompt: &[u32], fed: &[u32], segment: &[u32]) -> Outcome<Array> {
        continuation_rows(self, prompt, fed, segment)
    }

    /// `FamilyRunner::batch_last_logits` through the loader's `forward(x, 0)`.
    pub fn batch_last_logits(&mut self, rows: &[Vec<u32>]) -> Outcome<Array> {
        let x = batch_tensor(rows, &self.device)?;
        guarded(|| {
            let logits = self.forward(&x, 0)?;
            logits_array(&logits, &[rows.len()])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_rows_must_have_one_length() {
        let rows = vec![vec![1, 2, 3], vec![4, 5]];
        match batch_tensor(&rows, &Device::Cpu) {
            Err(Failure::Invalid(m)) => assert!(m.contains("equal length"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(batch_tensor(&[], &Device::Cpu), Err(Failure::Invalid(_))));
        let t = batch_tensor(&[vec![1, 2], vec![3, 4], vec![5, 6]], &Device::Cpu).unwrap();
        assert_eq!(t.dims(), &[3, 2]);
        assert_eq!(t.to_vec2::<u32>().unwrap(), vec![vec![1, 2], vec![3, 4], vec![5, 6]]);
    }

    #[test]
    fn logits_keep_the_rows_apart() {
        let t = Tensor::new(&[[[1f32, 2., 3.]], [[4., 5., 6.]]], &Device::Cpu).unwrap();
        let a = logits_array(&t, &[2]).unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data, vec![1., 2., 3., 4., 5., 6.]);
    }
}
