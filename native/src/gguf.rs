//! A runner over candle's GGUF loaders (`quantized_llama`, `quantized_qwen2`, `quantized_qwen3`,
//! `quantized_gemma3`, `quantized_phi3`, `quantized_phi`, `quantized_glm4`, `quantized_smollm3`):
//! each loader's `from_gguf`, which reads only the GGUF's metadata and tensors (never a config.json).

use crate::array::Array;
use crate::failure::{guarded, Failure, Outcome};
use crate::llama::{argmax, ids_tensor};
use candle_core::quantized::gguf_file;
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::{quantized_gemma3, quantized_llama, quantized_phi, quantized_phi3, quantized_qwen2};
// quantized_qwen3, quantized_glm4 and smol::quantized_smollm3 arrived in candle-transformers 0.9.2 (a build
// against 0.9.1: feature `before-0-9-2`)
#[cfg(not(feature = "before-0-9-2"))]
use candle_transformers::models::{quantized_glm4, quantized_qwen3, smol::quantized_smollm3};
use std::path::Path;

/// The loader keys, as Python's family registry names them.
pub const LOADERS: [&str; 8] = [
    "quantized_llama",
    "quantized_qwen2",
    "quantized_qwen3",
    "quantized_gemma3",
    "quantized_phi3",
    "quantized_phi",
    "quantized_glm4",
    "quantized_smollm3",
];

pub(crate) enum Weights {
    Llama(quantized_llama::ModelWeights),
    Qwen2(quantized_qwen2::ModelWeights),
    #[cfg(not(feature = "before-0-9-2"))]
    Qwen3(quantized_qwen3::ModelWeights),
    Gemma3(quantized_gemma3::ModelWeights),
    Phi3(quantized_phi3::ModelWeights),
    Phi(quantized_phi::ModelWeights),
    #[cfg(not(feature = "before-0-9-2"))]
    Glm4(quantized_glm4::ModelWeights),
    #[cfg(not(feature = "before-0-9-2"))]
    SmolLm3(quantized_smollm3::QuantizedModelForCausalLM),
}

impl Weights {
    /// The model with its KV cache as it is now, sharing the weights (candle tensors and quantized
    /// tensors are reference-counted: nothing is copied); None for quantized_qwen2, whose
    /// `ModelWeights` is not `Clone` (quantized_qwen2.rs:150), and for quantized_glm4 and
    /// quantized_smollm3, whose candle-nn `KvCache` writes into its buffer in place (kv_cache.rs:76,
    /// `slice_set`): a copy would share it. `forced_and_greedy` forks from it, a continuation
    /// (`chat`) restores it.
    pub(crate) fn snapshot(&self) -> Option<Weights> {
        match self {
            Weights::Llama(m) => Some(Weights::Llama(m.clone())),
            Weights::Qwen2(_) => None,
            #[cfg(not(feature = "before-0-9-2"))]
            Weights::Qwen3(m) => Some(Weights::Qwen3(m.clone())),
            Weights::Gemma3(m) => Some(Weights::Gemma3(m.clone())),
            Weights::Phi3(m) => Some(Weights::Phi3(m.clone())),
            // its cache grows by `Tensor::cat` (quantized_phi.rs:131-139): a copy is never written into
            Weights::Phi(m) => Some(Weights::Phi(m.clone())),
            #[cfg(not(feature = "before-0-9-2"))]
            Weights::Glm4(_) | Weights::SmolLm3(_) => None,
        }
    }
}

/// quantized_smollm3 reads the file itself (`from_gguf(path, ..)`) and prints its progress with `println!`
/// (quantized_smollm3.rs `from_gguf`); that goes to stderr here, so that stdout stays the caller's (a
/// `portkit verify --format json` report).
#[cfg(not(feature = "before-0-9-2"))]
fn load_smollm3(path: &Path, device: &Device) -> candle_core::Result<quantized_smollm3::QuantizedModelForCausalLM> {
    crate::stdio::stdout_to_stderr(|| {
        #[cfg(feature = "before-0-11-0")]
        return quantized_smollm3::QuantizedModelForCausalLM::from_gguf(path, device);
        #[cfg(not(feature = "before-0-11-0"))]
        quantized_smollm3::QuantizedModelForCausalLM::from_gguf(path, device, false)
    })
}

pub struct GgufRunner {
    pub(crate) model: Weights,
    loader: &'static str,
    pub(crate) device: Device,
    path: std::path::PathBuf,
}

/// The loaders whose per-layer capture comes from a copy proven bit-identical to the library.
pub const CAPTURE_LOADERS: [&str; 1] = ["quantized_gemma3"];

impl GgufRunner {
    pub fn load(path: &Path, device: Device) -> Outcome<Self> {
        Self::load_with(path, "quantized_llama", device)
    }

    pub fn load_with(path: &Path, loader: &str, device: Device) -> Outcome<Self> {
        let loader = LOADERS.iter().copied().find(|l| *l == loader).ok_or_else(|| {
            Failure::Invalid(format!("unknown GGUF loader `{loader}`: expected one of {}", LOADERS.join(", ")))
        })?;
        if !path.is_file() {
            return Err(Failure::NotFound(format!("GGUF file not found: {}", path.display())));
        }
        guarded(|| {
            let mut file = std::fs::File::open(path).map_err(|e| Failure::Invalid(format!("{}: {e}", path.display())))?;
            let content = gguf_file::Content::read(&mut file).map_err(|e| e.with_path(path))?;
            let model = match loader {
                "quantized_llama" => Weights::Llama(quantized_llama::ModelWeights::from_gguf(content, &mut file, &device)?),
                "quantized_qwen2" => Weights::Qwen2(quantized_qwen2::ModelWeights::from_gguf(content, &mut file, &device)?),
                #[cfg(not(feature = "before-0-9-2"))]
                "quantized_qwen3" => Weights::Qwen3(quantized_qwen3::ModelWeights::from_gguf(content, &mut file, &device)?),
                #[cfg(feature = "before-0-9-2")]
                "quantized_qwen3" => return Err(crate::family::absent(loader, "0.9.2")),
                "quantized_gemma3" => {
                    Weights::Gemma3(quantized_gemma3::ModelWeights::from_gguf(content, &mut file, &device)?)
                }
                // The example's `use_flash_attn` argument gets false, as for every runner here.
                "quantized_phi3" => {
                    Weights::Phi3(quantized_phi3::ModelWeights::from_gguf(false, content, &mut file, &device)?)
                }
                "quantized_phi" => Weights::Phi(quantized_phi::ModelWeights::from_gguf(content, &mut file, &device)?),
                // F32 activations, as the example runs on a CPU (candle-examples quantized-glm4)
                #[cfg(not(feature = "before-0-9-2"))]
                "quantized_glm4" => {
                    Weights::Glm4(quantized_glm4::ModelWeights::from_gguf(content, &mut file, &device, DType::F32)?)
                }
                #[cfg(not(feature = "before-0-9-2"))]
                _ => {
                    drop(content);
                    Weights::SmolLm3(load_smollm3(path, &device)?)
                }
                #[cfg(feature = "before-0-9-2")]
                _ => return Err(crate::family::absent(loader, "0.9.2")),
            };
            Ok(Self { model, loader, device: device.clone(), path: path.to_path_buf() })
        })
    }

    pub fn loader(&self) -> &'static str {
        self.loader
    }

    /// `forward` on one row of ids: its last position's logits.
    pub(crate) fn forward_row(&mut self, ids: &[u32], index_pos: usize) -> Outcome<Vec<f32>> {
        let x = ids_tensor(ids, &self.device)?;
        let logits = self.forward(&x, index_pos)?;
        Ok(logits.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
    }

    /// The loader's `forward(x, index_pos)` on a `(batch, seq_len)` tensor of ids. quantized_llama,
    /// qwen2, gemma3, phi3, phi and glm4 drop their KV cache when `index_pos == 0`; quantized_qwen3
    /// and quantized_smollm3 do not, so theirs is cleared here first.
    pub(crate) fn forward(&mut self, x: &Tensor, index_pos: usize) -> candle_core::Result<Tensor> {
        Ok(match &mut self.model {
            Weights::Llama(m) => m.forward(x, index_pos)?,
            Weights::Qwen2(m) => m.forward(x, index_pos)?,
            #[cfg(not(feature = "before-0-9-2"))]
            Weights::Qwen3(m) => {
                if index_pos == 0 {
                    m.clear_kv_cache();
                }
                m.forward(x, index_pos)?
            }
            Weights::Gemma3(m) => m.forward(x, index_pos)?,
            Weights::Phi3(m) => m.forward(x, index_pos)?,
            Weights::Phi(m) => m.forward(x, index_pos)?,
            #[cfg(not(feature = "before-0-9-2"))]
            Weights::Glm4(m) => m.forward(x, index_pos)?,
            #[cfg(not(feature = "before-0-9-2"))]
            Weights::SmolLm3(m) => {
                if index_pos == 0 {
                    m.clear_kv_cache();
                }
                // (batch, 1, vocab): the last position only (quantized_smollm3.rs `forward`)
                m.forward(x, index_pos)?.squeeze(1)?
            }
        })
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

    /// Per-layer values (embeddings, every sub-layer and `layer.N`, norm, logits) through the
    /// loader's copy of the forward, loaded from the same file (the runner keeps the library's
    /// model; the copy is dropped when this returns).
    pub fn capture(&self, ids: &[u32]) -> Outcome<Vec<(String, Array)>> {
        if !CAPTURE_LOADERS.contains(&self.loader) {
            return Err(Failure::NotImplemented(format!("per-layer: not available for {} GGUFs", self.loader)));
        }
        guarded(|| {
            let path = &self.path;
            let mut file = std::fs::File::open(path).map_err(|e| Failure::Invalid(format!("{}: {e}", path.display())))?;
            let content = gguf_file::Content::read(&mut file).map_err(|e| e.with_path(path))?;
            let mut copy = crate::quantized_gemma3_copy::ModelWeights::from_gguf(content, &mut file, &self.device)?;
            copy.capture(&ids_tensor(ids, &self.device)?)
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
