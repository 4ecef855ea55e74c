//! A copy of `candle_transformers::models::llama`'s forward (candle 0.11.0, src/models/llama.rs)
//! that keeps every layer's output. candle has no forward hooks and `Llama`'s fields are private,
//! so this is the only way to see inside; `tests` and portkit's Python tests prove that its
//! last-position logits equal the library's bit for bit (max |diff| == 0.0) before it is trusted.
//!
//! Each piece below mirrors the library line for line (same layer types, same op order); only the
//! KV cache is left out, because a capture is a single full pass from position 0, where the
//! library's cache holds nothing yet.
//!
//! Sub-layers: a `Sink` (`crate::sublayers`) is threaded through the decoder layer's and the
//! attention's `forward`; it copies the outputs of the submodules transformers names
//! (`input_layernorm`, the q/k/v projections before RoPE, `self_attn` after o_proj, the norms,
//! `mlp`) and changes no op, so the library's op order is kept line for line: `capture`'s
//! logits stay bit-identical to the library's with the sub-layers recorded.

use crate::array::Array;
use crate::sublayers::Sink;
use crate::failure::Outcome;
use candle_core::{DType, Device, IndexOp, Module, Result, Tensor};
use candle_nn::{embedding, Embedding, VarBuilder};
use candle_transformers::models::llama::{Config, Llama3RopeConfig, Llama3RopeType};
use candle_transformers::models::with_tracing::{linear_no_bias as linear, Linear, RmsNorm};
use std::f32::consts::PI;

/// `Cache::new`'s cos/sin tables (llama.rs lines 158-205).
fn rope_tables(config: &Config, dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
    let head_dim = config.hidden_size / config.num_attention_heads;
    let default_inv_freq: Vec<f32> = (0..head_dim)
        .step_by(2)
        .map(|i| 1f32 / config.rope_theta.powf(i as f32 / head_dim as f32))
        .collect();
    let theta = match &config.rope_scaling {
        None | Some(Llama3RopeConfig { rope_type: Llama3RopeType::Default, .. }) => default_inv_freq,
        Some(s) => {
            let low_freq_wavelen = s.original_max_position_embeddings as f32 / s.low_freq_factor;
            let high_freq_wavelen = s.original_max_position_embeddings as f32 / s.high_freq_factor;
            default_inv_freq
                .into_iter()
                .map(|freq| {
                    let wavelen = 2. * PI / freq;
                    if wavelen < high_freq_wavelen {
                        freq
                    } else if wavelen > low_freq_wavelen {
                        freq / s.factor
                    } else {
                        let smooth = (s.original_max_position_embeddings as f32 / wavelen - s.low_freq_factor)
                            / (s.high_freq_factor - s.low_freq_factor);
                        (1. - smooth) * freq / s.factor + smooth * freq
                    }
                })
                .collect()
        }
    };
    let theta = Tensor::new(theta, device)?;
    let idx_theta = Tensor::arange(0, config.max_position_embeddings as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((config.max_position_embeddings, 1))?
        .matmul(&theta.reshape((1, theta.elem_count()))?)?;
    Ok((idx_theta.cos()?.to_dtype(dtype)?, idx_theta.sin()?.to_dtype(dtype)?))
}

fn masked_fill(on_false: &Tensor, mask: &Tensor, on_true: f32) -> Result<Tensor> {
    let shape = mask.shape();
    let on_true = Tensor::new(on_true, on_false.device())?.broadcast_as(shape.dims())?;
    mask.where_cond(&on_true, on_false)
}

struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    num_attention_heads: usize,
    num_key_value_heads: usize,
    head_dim: usize,
}

impl Attention {
    fn load(vb: VarBuilder, cfg: &Config) -> Result<Self> {
        let size_in = cfg.hidden_size;
        let size_q = (cfg.hidden_size / cfg.num_attention_heads) * cfg.num_attention_heads;
        let size_kv = (cfg.hidden_size / cfg.num_attention_heads) * cfg.num_key_value_heads;
        Ok(Self {
            q_proj: linear(size_in, size_q, vb.pp("q_proj"))?,
            k_proj: linear(size_in, size_kv, vb.pp("k_proj"))?,
            v_proj: linear(size_in, size_kv, vb.pp("v_proj"))?,
            o_proj: linear(size_q, size_in, vb.pp("o_proj"))?,
            num_attention_heads: cfg.num_attention_heads,
            num_key_value_heads: cfg.num_key_value_heads,
            head_dim: cfg.hidden_size / cfg.num_attention_heads,
        })
    }

    fn forward(&self, x: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor, sink: &mut Sink) -> Result<Tensor> {
        let (b_sz, seq_len, hidden_size) = x.dims3()?;
        let q = self.q_proj.forward(x)?;
        let k = self.k_proj.forward(x)?;
        let v = self.v_proj.forward(x)?;
        sink.put("self_attn.q_proj", &q)?;
        sink.put("self_attn.k_proj", &k)?;
        sink.put("self_attn.v_proj", &v)?;
        let q = q.reshape((b_sz, seq_len, self.num_attention_heads, self.head_dim))?.transpose(1, 2)?.contiguous()?;
        let k = k.reshape((b_sz, seq_len, self.num_key_value_heads, self.head_dim))?.transpose(1, 2)?.contiguous()?;
        let v = v.reshape((b_sz, seq_len, self.num_key_value_heads, self.head_dim))?.transpose(1, 2)?;
        let q = candle_nn::rotary_emb::rope(&q, cos, sin)?;
        let k = candle_nn::rotary_emb::rope(&k, cos, sin)?;
        let n_rep = self.num_attention_heads / self.num_key_value_heads;
        let k = candle_transformers::utils::repeat_kv(k, n_rep)?;
        let v = candle_transformers::utils::repeat_kv(v, n_rep)?;
        let in_dtype = q.dtype();
        let q = q.to_dtype(DType::F32)?;
        let k = k.to_dtype(DType::F32)?;
        let v = v.to_dtype(DType::F32)?;
        let att = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?;
        let att = if seq_len == 1 {
            att
        } else {
            masked_fill(&att, &mask.broadcast_as(att.shape())?, f32::NEG_INFINITY)?
        };
        let att = candle_nn::ops::softmax_last_dim(&att)?;
        let y = att.matmul(&v.contiguous()?)?.to_dtype(in_dtype)?;
        let y = y.transpose(1, 2)?.reshape(&[b_sz, seq_len, hidden_size])?;
        self.o_proj.forward(&y)
    }
}

struct Mlp {
    gate: Linear,
    up: Linear,
    down: Linear,
}

impl Mlp {
    fn load(vb: VarBuilder, cfg: &Config) -> Result<Self> {
        Ok(Self {
            gate: linear(cfg.hidden_size, cfg.intermediate_size, vb.pp("gate_proj"))?,
            up: linear(cfg.hidden_size, cfg.intermediate_size, vb.pp("up_proj"))?,
            down: linear(cfg.intermediate_size, cfg.hidden_size, vb.pp("down_proj"))?,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = (candle_nn::ops::silu(&self.gate.forward(x)?)? * self.up.forward(x)?)?;
        self.down.forward(&x)
    }
}

struct Block {
    rms_1: RmsNorm,
    attn: Attention,
    rms_2: RmsNorm,
    mlp: Mlp,
}

impl Block {
    fn load(vb: VarBuilder, cfg: &Config) -> Result<Self> {
        Ok(Self {
            attn: Attention::load(vb.pp("self_attn"), cfg)?,
            mlp: Mlp::load(vb.pp("mlp"), cfg)?,
            rms_1: RmsNorm::new(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("input_layernorm"))?,
            rms_2: RmsNorm::new(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("post_attention_layernorm"))?,
        })
    }

    fn forward(&self, x: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor, sink: &mut Sink) -> Result<Tensor> {
        let residual = x;
        let x = self.rms_1.forward(x)?;
        sink.put("input_layernorm", &x)?;
        let x = self.attn.forward(&x, cos, sin, mask, sink)?;
        sink.put("self_attn", &x)?;
        let x = (x + residual)?;
        let residual = &x;
        let x = self.rms_2.forward(&x)?;
        sink.put("post_attention_layernorm", &x)?;
        let x = self.mlp.forward(&x)?;
        sink.put("mlp", &x)?;
        x + residual
    }
}

pub struct LlamaCopy {
    wte: Embedding,
    blocks: Vec<Block>,
    ln_f: RmsNorm,
    lm_head: Linear,
    cos: Tensor,
    sin: Tensor,
}

impl LlamaCopy {
    /// Loads like `Llama::load`, except that a missing block is an `Err` here, not a panic.
    pub fn load(vb: VarBuilder, cfg: &Config, cache_dtype: DType) -> Result<Self> {
        let wte = embedding(cfg.vocab_size, cfg.hidden_size, vb.pp("model.embed_tokens"))?;
        let lm_head = if cfg.tie_word_embeddings {
            Linear::from_weights(wte.embeddings().clone(), None)
        } else {
            linear(cfg.hidden_size, cfg.vocab_size, vb.pp("lm_head"))?
        };
        let ln_f = RmsNorm::new(cfg.hidden_size, cfg.rms_norm_eps, vb.pp("model.norm"))?;
        let blocks = (0..cfg.num_hidden_layers)
            .map(|i| Block::load(vb.pp(format!("model.layers.{i}")), cfg))
            .collect::<Result<Vec<_>>>()?;
        let (cos, sin) = rope_tables(cfg, cache_dtype, vb.device())?;
        Ok(Self { wte, blocks, ln_f, lm_head, cos, sin })
    }

    /// One pass over `ids` ([1, T]) from position 0, keeping embeddings, each block's output,
    /// the final norm (all [T, hidden]) and the last-position logits ([vocab], F32).
    pub fn capture(&self, ids: &Tensor) -> Outcome<Vec<(String, Array)>> {
        let (_, seq_len) = ids.dims2()?;
        let cos = self.cos.narrow(0, 0, seq_len)?;
        let sin = self.sin.narrow(0, 0, seq_len)?;
        let mask = candle_transformers::utils::build_causal_mask(seq_len, 0, ids.device())?;
        let mut out = Vec::with_capacity(self.blocks.len() + 3);
        let mut x = self.wte.forward(ids)?;
        out.push(("embeddings".to_string(), Array::from_tensor(&x.squeeze(0)?)?));
        for (i, block) in self.blocks.iter().enumerate() {
            x = block.forward(&x, &cos, &sin, &mask, &mut Sink::layer(&mut out, i))?;
            out.push((format!("layer.{i}"), Array::from_tensor(&x.squeeze(0)?)?));
        }
        let x = self.ln_f.forward(&x)?;
        out.push(("norm".to_string(), Array::from_tensor(&x.squeeze(0)?)?));
        let last = x.i((.., seq_len - 1, ..))?.contiguous()?;
        let logits = self.lm_head.forward(&last)?.to_dtype(DType::F32)?.squeeze(0)?;
        out.push(("logits".to_string(), Array::from_tensor(&logits)?));
        Ok(out)
    }
}
