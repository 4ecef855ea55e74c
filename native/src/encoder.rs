//! candle's encoder modules (the embedding models' `bert` and its kin): the config each
//! one's serde `Config` parses, the model each one's own `load`/`new` builds, and its public
//! forward, called as its API allows. The mask is passed as the caller gives it, in the module's
//! own convention (distilbert.rs: 1 = masked), never converted here: what a program passes is
//! the question verify asks.

use crate::array::Array;
use crate::{bert_copy, distilbert_copy, modernbert_copy, xlm_roberta_copy};
#[cfg(not(feature = "before-0-10-0"))]
use crate::nomic_bert_copy;
use crate::failure::{guarded, Failure, Outcome};
use crate::family::from_debug;
use crate::weights::shared_weights;
use candle_core::{DType, Device, Module, Tensor};
#[cfg(not(feature = "before-0-9-2"))] // only the qwen3 encoder's
use candle_nn::VarBuilder;
use candle_transformers::models::{bert, distilbert, jina_bert, modernbert, xlm_roberta};
// nomic_bert arrived in candle-transformers 0.10.0 and qwen3 in 0.9.2: a build against an older release
// (features `before-0-10-0`, `before-0-9-2`; portkit's release_build.py) runs the other encoders
#[cfg(not(feature = "before-0-10-0"))]
use candle_transformers::models::nomic_bert;
#[cfg(not(feature = "before-0-9-2"))]
use candle_transformers::models::qwen3;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::path::PathBuf;
#[cfg(not(feature = "before-0-9-2"))] // only the qwen3 encoder's
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoder {
    Bert,
    DistilBert,
    XlmRoberta,
    ModernBert,
    JinaBert,
    NomicBert,
    /// A decoder module's base model used for its hidden states (Qwen3-Embedding checkpoints):
    /// `qwen3::Model`, causal, no padding mask, a KV cache kept across forwards.
    Qwen3,
}

impl Encoder {
    pub const ALL: [Encoder; 7] = [Encoder::Bert, Encoder::DistilBert, Encoder::XlmRoberta, Encoder::ModernBert, Encoder::JinaBert, Encoder::NomicBert, Encoder::Qwen3];

    /// candle's module name, the key of Python's encoder registry.
    pub fn key(self) -> &'static str {
        match self {
            Encoder::Bert => "bert",
            Encoder::DistilBert => "distilbert",
            Encoder::XlmRoberta => "xlm_roberta",
            Encoder::ModernBert => "modernbert",
            Encoder::JinaBert => "jina_bert",
            Encoder::NomicBert => "nomic_bert",
            Encoder::Qwen3 => "qwen3",
        }
    }

    pub fn from_key(key: &str) -> Outcome<Self> {
        Self::ALL.iter().copied().find(|f| f.key() == key).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|f| f.key()).collect();
            Failure::Invalid(format!("unknown encoder family `{key}`: expected one of {}", known.join(", ")))
        })
    }
}

fn serde<T: DeserializeOwned>(config_json: &str) -> Outcome<T> {
    serde_json::from_str(config_json).map_err(|e| Failure::Config(e.to_string()))
}

/// The module's `Config` as candle holds it after serde, read back from its `Debug` text.
pub fn effective_config(encoder: Encoder, config_json: &str) -> Outcome<Map<String, Value>> {
    Ok(match encoder {
        Encoder::Bert => from_debug(&serde::<bert::Config>(config_json)?),
        Encoder::DistilBert => from_debug(&serde::<distilbert::Config>(config_json)?),
        Encoder::XlmRoberta => from_debug(&serde::<xlm_roberta::Config>(config_json)?),
        Encoder::ModernBert => from_debug(&serde::<modernbert::Config>(config_json)?),
        Encoder::JinaBert => from_debug(&serde::<jina_bert::Config>(config_json)?),
        #[cfg(not(feature = "before-0-10-0"))]
        Encoder::NomicBert => from_debug(&serde::<nomic_bert::Config>(config_json)?),
        #[cfg(not(feature = "before-0-9-2"))]
        Encoder::Qwen3 => from_debug(&serde::<qwen3::Config>(config_json)?),
        #[cfg(feature = "before-0-10-0")]
        Encoder::NomicBert => return Err(crate::family::absent(encoder.key(), "0.10.0")),
        #[cfg(feature = "before-0-9-2")]
        Encoder::Qwen3 => return Err(crate::family::absent(encoder.key(), "0.9.2")),
    })
}

enum Model {
    // the library's model, and the capture copy on the same weights (loaded once: `shared_weights`)
    Bert(bert::BertModel, bert_copy::BertModel),
    DistilBert(distilbert::DistilBertModel, distilbert_copy::DistilBertModel),
    XlmRoberta(xlm_roberta::XLMRobertaModel, xlm_roberta_copy::XLMRobertaModel),
    ModernBert(modernbert::ModernBert, modernbert_copy::ModernBert),
    JinaBert(jina_bert::BertModel),
    #[cfg(not(feature = "before-0-10-0"))]
    NomicBert(nomic_bert::NomicBertModel, nomic_bert_copy::NomicBertModel),
    // the weights and config to build a fresh `qwen3::Model` per forward, and one model kept
    // across forwards as a program that loads it once holds it
    #[cfg(not(feature = "before-0-9-2"))]
    Qwen3 { vb: VarBuilder<'static>, config: qwen3::Config, kept: Mutex<qwen3::Model> },
}

pub struct EncoderRunner {
    encoder: Encoder,
    model: Model,
    device: Device,
    config: Map<String, Value>,
}

fn rows_tensor(rows: &[Vec<u32>], device: &Device) -> Outcome<Tensor> {
    let n = rows.len();
    let len = rows.first().map_or(0, Vec::len);
    if n == 0 || len == 0 {
        return Err(Failure::Invalid("no ids: give at least one row of at least one id".into()));
    }
    if rows.iter().any(|r| r.len() != len) {
        return Err(Failure::Invalid(format!("rows of different lengths: pad them to one length ({len})")));
    }
    let flat: Vec<u32> = rows.iter().flatten().copied().collect();
    Ok(Tensor::from_vec(flat, (n, len), device)?)
}

impl EncoderRunner {
    /// The checkpoint through the module's own loader, as candle's examples call it.
    pub fn load(encoder: Encoder, files: Vec<PathBuf>, config_json: &str, dtype: DType, device: Device) -> Outcome<Self> {
        let config = effective_config(encoder, config_json)?;
        guarded(|| {
            let vb = shared_weights(&files, dtype, &device)?;
            let model = match encoder {
                Encoder::Bert => {
                    let config = serde(config_json)?;
                    Model::Bert(bert::BertModel::load(vb.clone(), &config)?, bert_copy::BertModel::load(vb, &config)?)
                }
                // the copy's own serde Config: the library's fields are private (distilbert.rs:58-72)
                Encoder::DistilBert => Model::DistilBert(
                    distilbert::DistilBertModel::load(vb.clone(), &serde(config_json)?)?,
                    distilbert_copy::DistilBertModel::load(vb, &serde(config_json)?)?,
                ),
                Encoder::XlmRoberta => {
                    let config = serde(config_json)?;
                    Model::XlmRoberta(xlm_roberta::XLMRobertaModel::new(&config, vb.clone())?, xlm_roberta_copy::XLMRobertaModel::new(&config, vb)?)
                }
                Encoder::ModernBert => {
                    let config = serde(config_json)?;
                    Model::ModernBert(modernbert::ModernBert::load(vb.clone(), &config)?, modernbert_copy::ModernBert::load(vb, &config)?)
                }
                Encoder::JinaBert => Model::JinaBert(jina_bert::BertModel::new(vb, &serde(config_json)?)?),
                // (effective_config above already refused these)
                #[cfg(feature = "before-0-10-0")]
                Encoder::NomicBert => return Err(crate::family::absent(encoder.key(), "0.10.0")),
                #[cfg(feature = "before-0-9-2")]
                Encoder::Qwen3 => return Err(crate::family::absent(encoder.key(), "0.9.2")),
                #[cfg(not(feature = "before-0-10-0"))]
                Encoder::NomicBert => {
                    let config = serde(config_json)?;
                    Model::NomicBert(nomic_bert::NomicBertModel::load(vb.clone(), &config)?, nomic_bert_copy::NomicBertModel::load(vb, &config)?)
                }
                #[cfg(not(feature = "before-0-9-2"))]
                Encoder::Qwen3 => {
                    let config: qwen3::Config = serde(config_json)?;
                    let kept = Mutex::new(qwen3::Model::new(&config, vb.clone())?);
                    Model::Qwen3 { vb, config, kept }
                }
            };
            Ok(Self { encoder, model, device: device.clone(), config })
        })
    }

    /// The encoders whose layers and sub-layers a capture copy records (native/copies/).
    /// jina_bert has none: transformers has no jina_bert module to compare its layers against.
    pub const CAPTURED: [Encoder; 5] = [Encoder::Bert, Encoder::DistilBert, Encoder::XlmRoberta, Encoder::ModernBert, Encoder::NomicBert];

    /// `hidden_states`'s inputs through the capture copy: `embeddings`, then each layer's
    /// sub-layers and `layers.N`, all [rows, seq, hidden]; the last layer is the forward's output.
    pub fn capture(&self, ids: &[Vec<u32>], type_ids: Option<&[Vec<u32>]>, mask: Option<&[Vec<u32>]>) -> Outcome<Vec<(String, Array)>> {
        guarded(|| {
            let (input, types, mask) = self.inputs(ids, type_ids, mask)?;
            match &self.model {
                Model::Bert(_, copy) => copy.capture(&input, &types, mask.as_ref()),
                #[cfg(not(feature = "before-0-10-0"))]
                Model::NomicBert(_, copy) => copy.capture(&input, Some(&types), mask.as_ref()),
                Model::DistilBert(_, copy) => copy.capture(&input, &self.distilbert_mask(&input, mask)?),
                Model::XlmRoberta(_, copy) => copy.capture(&input, &ones_unless(mask, &input)?, &types),
                Model::ModernBert(_, copy) => copy.capture(&input, &ones_unless(mask, &input)?),
                #[cfg(not(feature = "before-0-9-2"))]
                Model::Qwen3 { .. } => Err(Failure::Invalid(format!("no capture copy of candle's `{}` module: the captured encoders are {}", self.encoder.key(), Self::CAPTURED.map(|e| e.key()).join(", ")))),
                Model::JinaBert(_) => Err(Failure::Invalid(format!("no capture copy of candle's `{}` module: the captured encoders are {}", self.encoder.key(), Self::CAPTURED.map(|e| e.key()).join(", ")))),
            }
        })
    }

    /// ids, token type ids (None: zeros, as candle's examples pass) and the mask as tensors.
    fn inputs(&self, ids: &[Vec<u32>], type_ids: Option<&[Vec<u32>]>, mask: Option<&[Vec<u32>]>) -> Outcome<(Tensor, Tensor, Option<Tensor>)> {
        let input = rows_tensor(ids, &self.device)?;
        let types = match type_ids {
            Some(t) => rows_tensor(t, &self.device)?,
            None => input.zeros_like()?,
        };
        let mask = mask.map(|m| rows_tensor(m, &self.device)).transpose()?;
        Ok((input, types, mask))
    }

    pub fn encoder(&self) -> Encoder {
        self.encoder
    }

    pub fn config(&self) -> &Map<String, Value> {
        &self.config
    }

    /// [rows, seq, hidden]: the module's public forward. `type_ids` None: zeros (candle's examples);
    /// `mask` None: the module's call without one (bert, nomic_bert: `None`; jina_bert takes none;
    /// distilbert, xlm_roberta and modernbert require one: a mask of ones in their convention, as a
    /// program that has none builds it).
    pub fn hidden_states(&self, ids: &[Vec<u32>], type_ids: Option<&[Vec<u32>]>, mask: Option<&[Vec<u32>]>) -> Outcome<Array> {
        guarded(|| {
            let (input, types, mask) = self.inputs(ids, type_ids, mask)?;
            let out = match &self.model {
                Model::Bert(m, _) => m.forward(&input, &types, mask.as_ref())?,
                #[cfg(not(feature = "before-0-10-0"))]
                Model::NomicBert(m, _) => m.forward(&input, Some(&types), mask.as_ref())?,
                Model::JinaBert(m) => m.forward(&input)?,
                #[cfg(not(feature = "before-0-9-2"))]
                Model::Qwen3 { vb, config, .. } => {
                    no_mask(self.encoder, &mask)?;
                    // a fresh model: `qwen3::Model` appends every forward to its KV cache
                    // (qwen3.rs:223) and its reset is private (qwen3.rs:435)
                    qwen3::Model::new(config, vb.clone())?.forward(&input, 0)?
                }
                Model::DistilBert(m, _) => m.forward(&input, &self.distilbert_mask(&input, mask)?)?,
                Model::XlmRoberta(m, _) => m.forward(&input, &ones_unless(mask, &input)?, &types, None, None, None)?,
                Model::ModernBert(m, _) => m.forward(&input, &ones_unless(mask, &input)?)?,
            };
            Array::from_tensor(&out)
        })
    }

    /// [rows, seq, hidden] through the one model this runner keeps (qwen3: its KV cache grows
    /// with every call, as in a program that loads `qwen3::Model` once and embeds text after
    /// text; qwen3.rs:223, :435). The other modules keep no state: their `hidden_states`.
    pub fn hidden_states_one_model(&self, ids: &[Vec<u32>]) -> Outcome<Array> {
        guarded(|| match &self.model {
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Qwen3 { kept, .. } => {
                let input = rows_tensor(ids, &self.device)?;
                let mut model = kept.lock().map_err(|_| Failure::Invalid("the kept model was poisoned by an earlier panic".into()))?;
                Array::from_tensor(&model.forward(&input, 0)?)
            }
            _ => self.hidden_states(ids, None, None),
        })
    }

    /// distilbert.rs:183-186: `masked_fill(scores, mask.broadcast_as(scores), -inf)`: 1 is
    /// masked, and the mask broadcasts over [batch, heads, q, k]; none given: nothing masked.
    fn distilbert_mask(&self, input: &Tensor, mask: Option<Tensor>) -> Outcome<Tensor> {
        let (n, len) = input.dims2()?;
        let mask = match mask {
            Some(m) => m,
            None => Tensor::zeros((n, len), DType::U32, &self.device)?,
        };
        Ok(mask.to_dtype(DType::U8)?.reshape((n, 1, 1, len))?)
    }
}

/// A module whose forward takes no padding mask refuses one rather than ignore it.
#[cfg(not(feature = "before-0-9-2"))] // qwen3's, the one such module
fn no_mask(encoder: Encoder, mask: &Option<Tensor>) -> Outcome<()> {
    match mask {
        Some(_) => Err(Failure::Invalid(format!("candle's `{}` forward takes no padding mask: pass none", encoder.key()))),
        None => Ok(()),
    }
}

/// The mask a module that requires one gets from a program that has none: every token attends.
fn ones_unless(mask: Option<Tensor>, input: &Tensor) -> Outcome<Tensor> {
    Ok(match mask {
        Some(m) => m,
        None => input.ones_like()?,
    })
}
