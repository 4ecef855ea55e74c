//! A Qwen2 port written by hand, the way a user of the porting kit writes one (candle-nn blocks,
//! one full pass without a KV cache, greedy by re-running the sequence), with a switch for each
//! bug ports really have. Its forward, and the greedy loop around it, are docs/porting.md's
//! snippet (`build.rs` extracts it; it brings the `use` lines for Device, IndexOp, Module,
//! Result, Tensor and Dump, so this file does not import them again).
//!
//! Run: `portkit-hand-port MODEL_DIR OUT.safetensors --ids 1,2,3 [--tokens N] [--bug NAME]`
//! with NAME one of none, rope-theta-key, rope-interleaved, no-attention-scale, no-qkv-bias,
//! o-proj-transposed, gate-up-swapped, eps-layer2.

include!(concat!(env!("OUT_DIR"), "/porting_snippet.rs"));

use candle_core::DType;
use candle_nn::{Embedding, Linear, RmsNorm, VarBuilder};
use serde_json::Value;
use std::path::Path;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Bug {
    None,
    /// theta read from `rotary_emb_base` (GPT-NeoX's key), absent here: the default 10000
    /// instead of config.json's `rope_theta`
    RopeThetaKey,
    /// GPT-J's interleaved pairs (`rope_i`) where Qwen2 rotates halves (`rope`)
    RopeInterleaved,
    /// scores not divided by sqrt(head_dim)
    NoAttentionScale,
    /// q/k/v loaded with `linear_no_bias`: the checkpoint's biases are never added
    NoQkvBias,
    /// o_proj's weight used transposed ([in, out] read as [out, in]; square here)
    OProjTransposed,
    /// silu(up) * gate instead of silu(gate) * up
    GateUpSwapped,
    /// layer 2's norms with eps 1e-2 (a per-layer override with a typo) instead of rms_norm_eps
    EpsLayer2,
}

const BUGS: [(&str, Bug); 8] = [
    ("none", Bug::None),
    ("rope-theta-key", Bug::RopeThetaKey),
    ("rope-interleaved", Bug::RopeInterleaved),
    ("no-attention-scale", Bug::NoAttentionScale),
    ("no-qkv-bias", Bug::NoQkvBias),
    ("o-proj-transposed", Bug::OProjTransposed),
    ("gate-up-swapped", Bug::GateUpSwapped),
    ("eps-layer2", Bug::EpsLayer2),
];

struct Rope {
    cos: Tensor,
    sin: Tensor,
    interleaved: bool,
}

impl Rope {
    fn new(theta: f64, head_dim: usize, positions: usize, interleaved: bool, dev: &Device) -> Result<Self> {
        let inv_freq: Vec<f32> = (0..head_dim).step_by(2).map(|i| 1.0 / theta.powf(i as f64 / head_dim as f64) as f32).collect();
        let inv_freq = Tensor::new(inv_freq, dev)?.unsqueeze(0)?;
        let pos = Tensor::arange(0u32, positions as u32, dev)?.to_dtype(DType::F32)?.unsqueeze(1)?;
        let angles = pos.matmul(&inv_freq)?; // [positions, head_dim / 2]
        Ok(Self { cos: angles.cos()?, sin: angles.sin()?, interleaved })
    }

    /// x: [batch, heads, T, head_dim]
    fn apply(&self, x: &Tensor) -> Result<Tensor> {
        let t = x.dim(2)?;
        let (cos, sin) = (self.cos.narrow(0, 0, t)?, self.sin.narrow(0, 0, t)?);
        if self.interleaved {
            candle_nn::rotary_emb::rope_i(x, &cos, &sin)
        } else {
            candle_nn::rotary_emb::rope(x, &cos, &sin)
        }
    }
}

struct Attention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    o_proj: Linear,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    scaled: bool,
}

impl Attention {
    fn forward(&self, x: &Tensor, rope: &Rope, mask: &Tensor, prefix: &str, dump: &mut Dump) -> Result<Tensor> {
        let (b, t, _) = x.dims3()?;
        let (q, k, v) = (self.q_proj.forward(x)?, self.k_proj.forward(x)?, self.v_proj.forward(x)?);
        dump.put(&format!("{prefix}.q_proj"), &q)?;
        dump.put(&format!("{prefix}.k_proj"), &k)?;
        dump.put(&format!("{prefix}.v_proj"), &v)?;
        let split = |y: Tensor, n: usize| y.reshape((b, t, n, self.head_dim))?.transpose(1, 2)?.contiguous();
        let q = rope.apply(&split(q, self.heads)?)?;
        let k = rope.apply(&split(k, self.kv_heads)?)?;
        let v = split(v, self.kv_heads)?;
        // grouped-query attention: query head h reads key-value head h / (heads / kv_heads)
        let rep = self.heads / self.kv_heads;
        let k = candle_transformers::utils::repeat_kv(k, rep)?.contiguous()?;
        let v = candle_transformers::utils::repeat_kv(v, rep)?.contiguous()?;
        let mut scores = q.matmul(&k.t()?)?;
        if self.scaled {
            scores = (scores / (self.head_dim as f64).sqrt())?;
        }
        let probs = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(mask)?)?;
        let y = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, t, self.heads * self.head_dim))?;
        self.o_proj.forward(&y)
    }
}

struct Mlp {
    gate_proj: Linear,
    up_proj: Linear,
    down_proj: Linear,
    swapped: bool,
}

impl Module for Mlp {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (gate, up) = (self.gate_proj.forward(x)?, self.up_proj.forward(x)?);
        let (gate, up) = if self.swapped { (up, gate) } else { (gate, up) };
        self.down_proj.forward(&(candle_nn::ops::silu(&gate)? * up)?)
    }
}

struct DecoderLayer {
    input_layernorm: RmsNorm,
    self_attn: Attention,
    post_attention_layernorm: RmsNorm,
    mlp: Mlp,
}

struct Model {
    embed_tokens: Embedding,
    layers: Vec<DecoderLayer>,
    norm: RmsNorm,
    lm_head: Linear,
    rope: Rope,
}

fn get(cfg: &Value, key: &str) -> Result<f64> {
    cfg[key].as_f64().ok_or_else(|| candle_core::Error::Msg(format!("config.json: no number `{key}`")))
}

impl Model {
    fn load(vb: VarBuilder, cfg: &Value, bug: Bug) -> Result<Self> {
        let n = |key: &str| get(cfg, key).map(|v| v as usize);
        let (h, heads, kv_heads) = (n("hidden_size")?, n("num_attention_heads")?, n("num_key_value_heads")?);
        let (head_dim, inter, eps) = (h / heads, n("intermediate_size")?, get(cfg, "rms_norm_eps")?);
        let theta = if bug == Bug::RopeThetaKey { cfg["rotary_emb_base"].as_f64().unwrap_or(10_000.0) } else { get(cfg, "rope_theta")? };
        let embed_tokens = candle_nn::embedding(n("vocab_size")?, h, vb.pp("model.embed_tokens"))?;
        let mut layers = Vec::new();
        for i in 0..n("num_hidden_layers")? {
            let vb = vb.pp(format!("model.layers.{i}"));
            let (att, mlp) = (vb.pp("self_attn"), vb.pp("mlp"));
            let eps = if bug == Bug::EpsLayer2 && i == 2 { 1e-2 } else { eps };
            let qkv = |out: usize, name: &str| {
                if bug == Bug::NoQkvBias {
                    candle_nn::linear_no_bias(h, out, att.pp(name))
                } else {
                    candle_nn::linear(h, out, att.pp(name))
                }
            };
            let o = candle_nn::linear_no_bias(heads * head_dim, h, att.pp("o_proj"))?;
            let o = if bug == Bug::OProjTransposed { Linear::new(o.weight().t()?.contiguous()?, None) } else { o };
            layers.push(DecoderLayer {
                input_layernorm: candle_nn::rms_norm(h, eps, vb.pp("input_layernorm"))?,
                self_attn: Attention {
                    q_proj: qkv(heads * head_dim, "q_proj")?,
                    k_proj: qkv(kv_heads * head_dim, "k_proj")?,
                    v_proj: qkv(kv_heads * head_dim, "v_proj")?,
                    o_proj: o,
                    heads,
                    kv_heads,
                    head_dim,
                    scaled: bug != Bug::NoAttentionScale,
                },
                post_attention_layernorm: candle_nn::rms_norm(h, eps, vb.pp("post_attention_layernorm"))?,
                mlp: Mlp {
                    gate_proj: candle_nn::linear_no_bias(h, inter, mlp.pp("gate_proj"))?,
                    up_proj: candle_nn::linear_no_bias(h, inter, mlp.pp("up_proj"))?,
                    down_proj: candle_nn::linear_no_bias(inter, h, mlp.pp("down_proj"))?,
                    swapped: bug == Bug::GateUpSwapped,
                },
            });
        }
        let lm_head = if vb.contains_tensor("lm_head.weight") {
            candle_nn::linear_no_bias(h, n("vocab_size")?, vb.pp("lm_head"))?
        } else {
            Linear::new(embed_tokens.embeddings().clone(), None) // tied
        };
        let rope = Rope::new(theta, head_dim, n("max_position_embeddings")?, bug == Bug::RopeInterleaved, vb.device())?;
        Ok(Self { embed_tokens, layers, norm: candle_nn::rms_norm(h, get(cfg, "rms_norm_eps")?, vb.pp("model.norm"))?, lm_head, rope })
    }

    /// [T, T]: 0 where position i may attend to j (j <= i), -inf above the diagonal.
    fn causal_mask(&self, t: usize) -> Result<Tensor> {
        let mask: Vec<f32> = (0..t).flat_map(|i| (0..t).map(move |j| if j > i { f32::NEG_INFINITY } else { 0.0 })).collect();
        Tensor::from_vec(mask, (t, t), &Device::Cpu)
    }
}

const USAGE: &str = "usage: portkit-hand-port MODEL_DIR OUT.safetensors --ids 1,2,3 [--tokens N] [--bug NAME]";

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
                let name = value()?;
                bug = BUGS.iter().find(|(n, _)| n == name).map(|(_, b)| *b).ok_or_else(|| {
                    format!("unknown --bug {name:?}: one of {}", BUGS.map(|(n, _)| n).join(", "))
                })?;
            }
            _ => pos.push(a.clone()),
        }
    }
    if pos.len() != 2 || ids.is_empty() {
        return Err(USAGE.into());
    }
    let dir = Path::new(&pos[0]);
    let cfg: Value = serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)?;
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[dir.join("model.safetensors")], DType::F32, &Device::Cpu)? };
    let model = Model::load(vb, &cfg, bug)?;
    let greedy = dump_then_generate(&model, &ids, tokens, &pos[1])?;
    eprintln!("portkit-hand-port ({bug:?}): wrote {} (greedy {greedy:?})", pos[1]);
    Ok(())
}
