//! A user's own candle port of Llama, dumped with `portkit_dump` so that `portkit compare` can
//! judge it against `portkit reference`. It is written the way a port is written (candle-nn
//! building blocks, one full pass, no KV cache), not copied from candle-transformers, and has
//! a switch for two bugs ports really have:
//!
//! - `--bug eps-layer2`: layer 2's norms use `rms_norm_eps` 1e-2 (a per-layer override with a
//!   typo for 1e-5) instead of config.json's; the first bad value is layer.2.input_layernorm. (1e-6 would not
//!   show: layer 2's input has a mean square of 16 to 50 here, so eps 1e-5 against 1e-6 moves
//!   its output by 1e-7 relative, under f32 noise; `portkit compare` rightly calls it clean.)
//! - `--bug rope-interleaved`: GPT-J's interleaved rotation (`rope_i`) where Llama rotates
//!   halves (`rope`, NeoX style); every layer from layer.0 is off, from layer.0.self_attn on (the
//!   projections before it agree), at every position but position 0.
//!
//! It dumps each layer's sub-layers (`layer.N.input_layernorm`, `layer.N.self_attn.q_proj`, ...)
//! as well as the layers, so `portkit compare` says what inside the first bad layer differs.
//!
//! Build: `cd native/portkit-dump && cargo build --release --examples`
//! Run:   `$CARGO_TARGET_DIR/release/examples/llama_port MODEL_DIR OUT.safetensors --ids 1,2,3 [--tokens N] [--bug eps-layer2|rope-interleaved]`
//!        (`target/release/examples/llama_port` without CARGO_TARGET_DIR)

use candle_core::{DType, Device, IndexOp, Module, Result, Tensor, D};
use candle_nn::{Embedding, Linear, RmsNorm, VarBuilder};
use candle_transformers::models::llama::{Config, LlamaConfig};
use portkit_dump::Dump;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bug {
    None,
    EpsLayer2,
    RopeInterleaved,
}

struct Layer {
    input_norm: RmsNorm,
    q: Linear,
    k: Linear,
    v: Linear,
    o: Linear,
    post_norm: RmsNorm,
    gate: Linear,
    up: Linear,
    down: Linear,
}

struct Port {
    embed: Embedding,
    layers: Vec<Layer>,
    norm: RmsNorm,
    lm_head: Linear,
    cos: Tensor,
    sin: Tensor,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    bug: Bug,
}

impl Port {
    fn load(vb: VarBuilder, cfg: &Config, bug: Bug) -> Result<Self> {
        if cfg.rope_scaling.is_some() {
            candle_core::bail!("this example port has no llama3 rope scaling");
        }
        let (h, hd) = (cfg.hidden_size, cfg.hidden_size / cfg.num_attention_heads);
        let kv = cfg.num_key_value_heads * hd;
        let lin = |i, o, vb: VarBuilder| candle_nn::linear_no_bias(i, o, vb);
        let embed = candle_nn::embedding(cfg.vocab_size, h, vb.pp("model.embed_tokens"))?;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
        for i in 0..cfg.num_hidden_layers {
            let vb = vb.pp(format!("model.layers.{i}"));
            let eps = if bug == Bug::EpsLayer2 && i == 2 { 1e-2 } else { cfg.rms_norm_eps };
            let (att, mlp) = (vb.pp("self_attn"), vb.pp("mlp"));
            layers.push(Layer {
                input_norm: candle_nn::rms_norm(h, eps, vb.pp("input_layernorm"))?,
                q: lin(h, h, att.pp("q_proj"))?,
                k: lin(h, kv, att.pp("k_proj"))?,
                v: lin(h, kv, att.pp("v_proj"))?,
                o: lin(h, h, att.pp("o_proj"))?,
                post_norm: candle_nn::rms_norm(h, eps, vb.pp("post_attention_layernorm"))?,
                gate: lin(h, cfg.intermediate_size, mlp.pp("gate_proj"))?,
                up: lin(h, cfg.intermediate_size, mlp.pp("up_proj"))?,
                down: lin(cfg.intermediate_size, h, mlp.pp("down_proj"))?,
            });
        }
        let lm_head = if cfg.tie_word_embeddings {
            Linear::new(embed.embeddings().clone(), None)
        } else {
            lin(h, cfg.vocab_size, vb.pp("lm_head"))?
        };
        // cos/sin of position * theta^(-2i/head_dim), [max_positions, head_dim / 2]
        let inv_freq: Vec<f32> = (0..hd).step_by(2).map(|i| 1.0 / cfg.rope_theta.powf(i as f32 / hd as f32)).collect();
        let inv_freq = Tensor::new(inv_freq, vb.device())?.unsqueeze(0)?;
        let pos = Tensor::arange(0u32, cfg.max_position_embeddings as u32, vb.device())?.to_dtype(DType::F32)?.unsqueeze(1)?;
        let angles = pos.matmul(&inv_freq)?;
        Ok(Self {
            embed,
            layers,
            norm: candle_nn::rms_norm(h, cfg.rms_norm_eps, vb.pp("model.norm"))?,
            lm_head,
            cos: angles.cos()?,
            sin: angles.sin()?,
            heads: cfg.num_attention_heads,
            kv_heads: cfg.num_key_value_heads,
            head_dim: hd,
            bug,
        })
    }

    fn rotate(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        match self.bug {
            Bug::RopeInterleaved => candle_nn::rotary_emb::rope_i(x, cos, sin),
            _ => candle_nn::rotary_emb::rope(x, cos, sin),
        }
    }

    /// `prefix`: `layer.N.self_attn`, for the projections' outputs (before RoPE).
    fn attention(&self, l: &Layer, x: &Tensor, cos: &Tensor, sin: &Tensor, mask: &Tensor, prefix: &str, dump: &mut Dump) -> Result<Tensor> {
        let (b, t, h) = x.dims3()?;
        let (q, k, v) = (l.q.forward(x)?, l.k.forward(x)?, l.v.forward(x)?);
        dump.put(&format!("{prefix}.q_proj"), &q)?;
        dump.put(&format!("{prefix}.k_proj"), &k)?;
        dump.put(&format!("{prefix}.v_proj"), &v)?;
        let heads = |y: Tensor, n: usize| y.reshape((b, t, n, self.head_dim))?.transpose(1, 2)?.contiguous();
        let q = self.rotate(&heads(q, self.heads)?, cos, sin)?;
        let k = self.rotate(&heads(k, self.kv_heads)?, cos, sin)?;
        let v = heads(v, self.kv_heads)?;
        let rep = self.heads / self.kv_heads;
        let k = candle_transformers::utils::repeat_kv(k, rep)?;
        let v = candle_transformers::utils::repeat_kv(v, rep)?;
        let scores = (q.matmul(&k.t()?)? / (self.head_dim as f64).sqrt())?;
        let blocked = Tensor::new(f32::NEG_INFINITY, x.device())?.broadcast_as(scores.shape())?;
        let scores = mask.broadcast_as(scores.shape())?.where_cond(&blocked, &scores)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let y = probs.matmul(&v.contiguous()?)?.transpose(1, 2)?.reshape((b, t, h))?;
        l.o.forward(&y)
    }

    /// One pass over `ids` ([1, T]); logits of every position, [1, T, vocab]. Every value the
    /// reference has goes into `dump` (a `Dump::disabled()` keeps nothing: the greedy steps).
    fn forward(&self, ids: &Tensor, dump: &mut Dump) -> Result<Tensor> {
        let t = ids.dim(1)?;
        let (cos, sin) = (self.cos.narrow(0, 0, t)?, self.sin.narrow(0, 0, t)?);
        let mask = candle_transformers::utils::build_causal_mask(t, 0, ids.device())?;
        let mut x = self.embed.forward(ids)?;
        dump.put("ids", ids)?;
        dump.put("embeddings", &x)?;
        for (i, l) in self.layers.iter().enumerate() {
            let name = |path: &str| format!("layer.{i}.{path}");
            let h = l.input_norm.forward(&x)?;
            dump.put(&name("input_layernorm"), &h)?;
            let h = self.attention(l, &h, &cos, &sin, &mask, &name("self_attn"), dump)?;
            dump.put(&name("self_attn"), &h)?;
            x = (h + &x)?;
            let m = l.post_norm.forward(&x)?;
            dump.put(&name("post_attention_layernorm"), &m)?;
            let h = l.down.forward(&(candle_nn::ops::silu(&l.gate.forward(&m)?)? * l.up.forward(&m)?)?)?;
            dump.put(&name("mlp"), &h)?;
            x = (h + &x)?;
            dump.put(&format!("layer.{i}"), &x)?;
        }
        let x = self.norm.forward(&x)?;
        let logits = self.lm_head.forward(&x)?;
        dump.put("norm", &x)?;
        dump.put("logits", &logits)?;
        Ok(logits)
    }
}

fn weight_files(dir: &Path) -> std::result::Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let index = dir.join("model.safetensors.index.json");
    if !index.is_file() {
        return Ok(vec![dir.join("model.safetensors")]);
    }
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&index)?)?;
    let map = doc["weight_map"].as_object().ok_or("index without weight_map")?;
    let mut files: Vec<PathBuf> = map.values().filter_map(|v| v.as_str()).map(|f| dir.join(f)).collect();
    files.sort();
    files.dedup();
    Ok(files)
}

const USAGE: &str = "usage: llama_port MODEL_DIR OUT.safetensors --ids 1,2,3 [--tokens N] [--bug none|eps-layer2|rope-interleaved]";

fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut ids, mut tokens, mut bug, mut pos) = (Vec::<u32>::new(), 8usize, Bug::None, Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(USAGE);
        match a.as_str() {
            "--ids" => ids = value()?.split(',').map(|s| s.trim().parse()).collect::<std::result::Result<_, _>>()?,
            "--tokens" => tokens = value()?.parse()?,
            "--bug" => {
                bug = match value()?.as_str() {
                    "none" => Bug::None,
                    "eps-layer2" => Bug::EpsLayer2,
                    "rope-interleaved" => Bug::RopeInterleaved,
                    other => return Err(format!("unknown --bug {other:?}; {USAGE}").into()),
                }
            }
            _ => pos.push(a.clone()),
        }
    }
    if pos.len() != 2 || ids.is_empty() {
        return Err(USAGE.into());
    }
    let (dir, out) = (Path::new(&pos[0]), Path::new(&pos[1]));
    let dev = Device::Cpu;
    let cfg: LlamaConfig = serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)?;
    let cfg = cfg.into_config(false);
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&weight_files(dir)?, DType::F32, &dev)? };
    let port = Port::load(vb, &cfg, bug)?;

    let mut dump = Dump::create(out)?;
    let prompt = Tensor::new(ids.as_slice(), &dev)?.unsqueeze(0)?;
    let mut logits = port.forward(&prompt, &mut dump)?;
    let (mut seq, mut chose) = (ids.clone(), Vec::with_capacity(tokens));
    for step in 0..tokens {
        let row = logits.i((0, seq.len() - 1))?;
        seq.push(row.argmax(D::Minus1)?.to_scalar::<u32>()?);
        chose.push(row);
        if step + 1 < tokens {
            logits = port.forward(&Tensor::new(seq.as_slice(), &dev)?.unsqueeze(0)?, &mut Dump::disabled())?;
        }
    }
    if tokens > 0 {
        dump.put("greedy", &Tensor::new(&seq[ids.len()..], &dev)?)?;
        dump.put("greedy.logits", &Tensor::stack(&chose, 0)?)?;
    }
    dump.finish()?;
    eprintln!("llama_port ({bug:?}): wrote {}", out.display());
    Ok(())
}
