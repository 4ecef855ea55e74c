//! Write what your own candle program computes in the layout `portkit compare` reads, so that
//! `portkit compare ref.safetensors yours.safetensors` names the first layer where your port
//! leaves transformers, and inside it the first sub-layer (`portkit reference` writes the
//! other side).
//!
//! ```no_run
//! # use candle_core::{Device, Tensor};
//! # fn main() -> candle_core::Result<()> {
//! let mut dump = portkit_dump::Dump::create("candle.safetensors")?;
//! let x = Tensor::zeros((1, 5, 64), candle_core::DType::F32, &Device::Cpu)?;
//! dump.put("layer.3.input_layernorm", &x)?; // [1, T, hidden] is stored as [T, hidden]
//! dump.put("layer.3", &x)?;
//! dump.finish()?;
//! // every other forward (a greedy loop) takes a dump that keeps nothing
//! Dump::disabled().put("layer.3", &x)?;
//! # use portkit_dump::Dump;
//! # Ok(()) }
//! ```
//!
//! The layout (one sequence, batch dimension dropped):
//!
//! | name | shape | what |
//! |---|---|---|
//! | `ids` | `[T]` integer | the prompt the program fed ([`Dump::put_ids`]); compare checks it first: other ids than the reference's are shown decoded where they part, and nothing else is compared |
//! | `embeddings` | `[T, hidden]` | the token embeddings |
//! | `layer.N.<sub-layer>` | `[T, features]` | inside decoder layer N, named by transformers' attribute path (below) |
//! | `layer.N` | `[T, hidden]` | the hidden state after decoder layer N |
//! | `norm` | `[T, hidden]` | after the final norm |
//! | `logits` | `[T, vocab]` or `[vocab]` | every position, or only the last |
//! | `greedy` | `[N]` integer | greedy continuation of the prompt |
//! | `greedy.logits` | `[N, vocab]` | row k: the logits that chose greedy token k (optional) |
//!
//! The sub-layers ([`SUBLAYERS`]) are the outputs of the submodules of transformers'
//! `model.layers.N`: `input_layernorm`, `self_attn.q_proj`, `self_attn.k_proj`,
//! `self_attn.v_proj` (the projections before RoPE, `[T, heads * head_dim]`), `self_attn`
//! (after `o_proj`), `post_attention_layernorm`, `mlp`, and where a model has them phi3's fused
//! `self_attn.qkv_proj`, gemma2/3's `pre_feedforward_layernorm`, `post_feedforward_layernorm` and
//! glm4's `post_self_attn_layernorm`, `post_mlp_layernorm`.
//!
//! Any subset may be written; compare compares what is there. Tensors are copied to the CPU
//! and kept in their dtype (f32, f16, bf16; integers for `ids` and `greedy`).

use candle_core::{Device, Error, Result, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The sub-layer paths a `layer.N.<path>` name may hold: the submodules of transformers'
/// decoder layers that `portkit reference` records (portkit's `portkit/families/sublayers.py`
/// lists the same names; a test holds the two together).
pub const SUBLAYERS: [&str; 12] = [
    "input_layernorm",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.qkv_proj",
    "self_attn",
    "post_self_attn_layernorm",
    "post_attention_layernorm",
    "pre_feedforward_layernorm",
    "mlp",
    "post_mlp_layernorm",
    "post_feedforward_layernorm",
];

/// What a name holds, and so which shapes it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `ids`, `greedy`: rank 1, integer.
    Tokens,
    /// `embeddings`, `layer.N`, `norm`: `[T, hidden]`.
    Hidden,
    /// `layer.N.<sub-layer>`: `[T, features]`.
    Sublayer,
    /// `logits`: `[T, vocab]` or `[vocab]`.
    Logits,
}

fn kind_of(name: &str) -> Option<Kind> {
    match name {
        "ids" | "greedy" => Some(Kind::Tokens),
        "embeddings" | "norm" => Some(Kind::Hidden),
        "logits" | "greedy.logits" => Some(Kind::Logits),
        _ => {
            let rest = name.strip_prefix("layer.")?;
            let (n, sub) = match rest.split_once('.') {
                Some((n, sub)) => (n, Some(sub)),
                None => (rest, None),
            };
            let canonical = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'));
            match sub {
                _ if !canonical => None,
                None => Some(Kind::Hidden),
                Some(sub) if SUBLAYERS.contains(&sub) => Some(Kind::Sublayer),
                Some(_) => None,
            }
        }
    }
}

/// One dump file, written by [`Dump::finish`]; or, from [`Dump::disabled`], one that keeps
/// nothing, for every forward but the dumped one.
pub struct Dump {
    /// None: disabled.
    path: Option<PathBuf>,
    tensors: HashMap<String, Tensor>,
}

impl Dump {
    /// Starts a dump that `finish` writes to `path` (the directory must exist).
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Some(dir) = path.parent() {
            if !dir.as_os_str().is_empty() && !dir.is_dir() {
                return Err(Error::Msg(format!("portkit-dump: {}: the directory does not exist", dir.display())));
            }
        }
        Ok(Self { path: Some(path), tensors: HashMap::new() })
    }

    /// A dump that keeps nothing: pass it to every forward but the one you dump (the steps of a
    /// greedy loop), so that one `forward(&ids, &mut Dump)` serves both. `put` still refuses a
    /// name outside the layout or a wrong rank (cheap checks, no copy); `finish` writes nothing.
    pub fn disabled() -> Self {
        Self { path: None, tensors: HashMap::new() }
    }

    /// False for [`Dump::disabled`]: skip computing a value only the dump needs.
    pub fn is_enabled(&self) -> bool {
        self.path.is_some()
    }

    /// Keeps a copy of `tensor` under `name` (see the layout above). A leading batch
    /// dimension of 1 is dropped; a name outside the layout, a batch over 1, a wrong rank or
    /// a name given twice is an error here, not a surprise in `portkit compare`.
    pub fn put(&mut self, name: &str, tensor: &Tensor) -> Result<()> {
        let kind = kind_of(name).ok_or_else(|| {
            Error::Msg(format!(
                "portkit-dump: unknown name {name:?} (expected ids, embeddings, layer.N, layer.N.<sub-layer>, norm, logits, greedy or greedy.logits; sub-layers: {})",
                SUBLAYERS.join(", ")
            ))
        })?;
        let rank = check(name, kind, tensor)?;
        if !self.is_enabled() {
            return Ok(());
        }
        if self.tensors.contains_key(name) {
            return Err(Error::Msg(format!(
                "portkit-dump: {name:?} was already put (dump one forward; give the others Dump::disabled())"
            )));
        }
        let mut t = tensor.clone();
        while t.rank() > rank {
            t = t.squeeze(0)?;
        }
        self.tensors.insert(name.to_string(), t.to_device(&Device::Cpu)?.contiguous()?);
        Ok(())
    }

    /// Records the prompt ids the program fed its model (what `tokenizer.encode(prompt, ..)?.get_ids()`
    /// gave), as `ids`. `portkit compare` checks them before any logits: a hand-written prompt that
    /// is not the one transformers' chat template renders (a missing default system prompt, a
    /// stray space) shows as both prompts decoded where they part.
    pub fn put_ids(&mut self, ids: &[u32]) -> Result<()> {
        if ids.is_empty() {
            return Err(Error::Msg("portkit-dump: no ids to put (the prompt is empty)".into()));
        }
        self.put("ids", &Tensor::new(ids, &Device::Cpu)?)
    }

    /// Writes the file (through a temporary name, so a reader never sees half of it); a
    /// disabled dump writes nothing.
    pub fn finish(self) -> Result<()> {
        let Some(path) = self.path else { return Ok(()) };
        if self.tensors.is_empty() {
            return Err(Error::Msg(format!("portkit-dump: nothing was put into {}", path.display())));
        }
        let mut tmp = path.clone().into_os_string();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        candle_core::safetensors::save(&self.tensors, &tmp)?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }
}

/// The rank `tensor` is stored at, once leading batch dimensions of 1 are dropped; an error for
/// a batch over 1, a wrong rank or float token ids. Reads the dims only: no copy.
fn check(name: &str, kind: Kind, tensor: &Tensor) -> Result<usize> {
    let dims = tensor.dims();
    let rank = match kind {
        Kind::Tokens => 1,
        Kind::Hidden | Kind::Sublayer => 2,
        Kind::Logits => dims.len().clamp(1, 2),
    };
    if kind == Kind::Sublayer && dims.len() > 3 {
        return Err(Error::Msg(format!(
            "portkit-dump: {name:?} has shape {dims:?}, expected [T, features]: a projection is put as [1, T, heads * head_dim], before it is split into heads and rotated"
        )));
    }
    let lead = dims.len().saturating_sub(rank);
    if let Some(&batch) = dims[..lead].iter().find(|&&d| d != 1) {
        return Err(Error::Msg(format!(
            "portkit-dump: {name:?} has shape {dims:?}; a dump holds one sequence (batch 1, not {batch})"
        )));
    }
    if dims.len() < rank {
        let want = match kind {
            Kind::Tokens => "[T] token ids",
            Kind::Hidden => "[T, hidden]",
            Kind::Sublayer => "[T, features]",
            Kind::Logits => "[T, vocab] or [vocab]",
        };
        return Err(Error::Msg(format!("portkit-dump: {name:?} has shape {dims:?}, expected {want}")));
    }
    if kind == Kind::Tokens && tensor.dtype().is_float() {
        return Err(Error::Msg(format!(
            "portkit-dump: {name:?} holds token ids: give an integer tensor, not {:?}",
            tensor.dtype()
        )));
    }
    Ok(rank)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::DType;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("portkit-dump-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn writes_the_layout_without_batch_dims() -> Result<()> {
        let path = tmp("layout.safetensors");
        let dev = Device::Cpu;
        let mut d = Dump::create(&path)?;
        d.put("ids", &Tensor::new(&[[1u32, 5, 7]], &dev)?)?;
        d.put("embeddings", &Tensor::ones((1, 3, 4), DType::F32, &dev)?)?;
        d.put("layer.0", &Tensor::ones((3, 4), DType::BF16, &dev)?)?;
        d.put("logits", &Tensor::ones((1, 3, 10), DType::F32, &dev)?)?;
        d.put("greedy", &Tensor::new(&[2i64, 3], &dev)?)?;
        d.finish()?;
        let back = candle_core::safetensors::load(&path, &dev)?;
        assert_eq!(back["ids"].dims(), &[3]);
        assert_eq!(back["ids"].to_vec1::<u32>()?, vec![1, 5, 7]);
        assert_eq!(back["embeddings"].dims(), &[3, 4]);
        assert_eq!(back["layer.0"].dtype(), DType::BF16);
        assert_eq!(back["logits"].dims(), &[3, 10]);
        assert_eq!(back["greedy"].dims(), &[2]);
        assert!(!PathBuf::from(format!("{}.partial", path.display())).exists());
        Ok(())
    }

    #[test]
    fn put_ids_records_the_prompt_fed() -> Result<()> {
        let path = tmp("ids.safetensors");
        let mut d = Dump::create(&path)?;
        d.put_ids(&[1, 151644, 872])?;
        assert!(d.put_ids(&[2]).unwrap_err().to_string().contains("already put"));
        d.finish()?;
        let back = candle_core::safetensors::load(&path, &Device::Cpu)?;
        assert_eq!(back["ids"].dims(), &[3]);
        assert_eq!(back["ids"].to_vec1::<u32>()?, vec![1, 151644, 872]);
        assert!(Dump::create(tmp("empty-ids.safetensors"))?.put_ids(&[]).is_err());
        Dump::disabled().put_ids(&[5])?;
        Ok(())
    }

    #[test]
    fn last_position_logits_keep_their_rank() -> Result<()> {
        let path = tmp("last.safetensors");
        let mut d = Dump::create(&path)?;
        d.put("logits", &Tensor::ones(10, DType::F32, &Device::Cpu)?)?;
        d.finish()?;
        assert_eq!(candle_core::safetensors::load(&path, &Device::Cpu)?["logits"].dims(), &[10]);
        Ok(())
    }

    #[test]
    fn refuses_what_compare_would_refuse() -> Result<()> {
        let dev = Device::Cpu;
        let mut d = Dump::create(tmp("refused.safetensors"))?;
        let hidden = Tensor::ones((3, 4), DType::F32, &dev)?;
        for bad in ["layer3", "layer.03", "layer.", "hidden", "Logits"] {
            let e = d.put(bad, &hidden).unwrap_err().to_string();
            assert!(e.contains("unknown name"), "{bad}: {e}");
        }
        let e = d.put("layer.1", &Tensor::ones((2, 3, 4), DType::F32, &dev)?).unwrap_err().to_string();
        assert!(e.contains("batch 1"), "{e}");
        let e = d.put("norm", &Tensor::ones(4, DType::F32, &dev)?).unwrap_err().to_string();
        assert!(e.contains("expected [T, hidden]"), "{e}");
        let e = d.put("ids", &Tensor::ones(3, DType::F32, &dev)?).unwrap_err().to_string();
        assert!(e.contains("integer tensor"), "{e}");
        d.put("layer.1", &hidden)?;
        let e = d.put("layer.1", &hidden).unwrap_err().to_string();
        assert!(e.contains("already put"), "{e}");
        assert!(Dump::create("/nonexistent-portkit-dir/x.safetensors").is_err());
        assert!(Dump::create(tmp("empty.safetensors"))?.finish().is_err());
        Ok(())
    }

    #[test]
    fn sublayers_are_named_by_attribute_path_and_shape_checked() -> Result<()> {
        let dev = Device::Cpu;
        let path = tmp("sub.safetensors");
        let mut d = Dump::create(&path)?;
        for sub in SUBLAYERS {
            d.put(&format!("layer.2.{sub}"), &Tensor::ones((1, 3, 8), DType::F32, &dev)?)?;
        }
        for bad in ["layer.2.q_proj", "layer.2.self_attn.o_proj", "layer.02.mlp", "layer.2.", "layer.2.mlp.down_proj", "layer.x.mlp"] {
            let e = d.put(bad, &Tensor::ones((3, 8), DType::F32, &dev)?).unwrap_err().to_string();
            assert!(e.contains("unknown name") && e.contains("self_attn.q_proj"), "{bad}: {e}");
        }
        // split into heads: [1, heads, T, head_dim] or [1, T, heads, head_dim]
        for shape in [(1, 4, 3, 2), (1, 3, 4, 2), (1, 1, 4, 2)] {
            let e = d.put("layer.0.self_attn.q_proj", &Tensor::ones(shape, DType::F32, &dev)?).unwrap_err().to_string();
            assert!(e.contains("before it is split into heads"), "{shape:?}: {e}");
        }
        let e = d.put("layer.0.mlp", &Tensor::ones(8, DType::F32, &dev)?).unwrap_err().to_string();
        assert!(e.contains("expected [T, features]"), "{e}");
        d.finish()?;
        let back = candle_core::safetensors::load(&path, &dev)?;
        assert_eq!(back.len(), SUBLAYERS.len());
        assert_eq!(back["layer.2.self_attn.q_proj"].dims(), &[3, 8]);
        Ok(())
    }

    /// One `forward(&ids, &mut Dump)` for the dumped pass and every greedy step after it.
    #[test]
    fn a_disabled_dump_serves_the_greedy_loop() -> Result<()> {
        let dev = Device::Cpu;
        let path = tmp("greedy.safetensors");
        fn forward(x: &Tensor, dump: &mut Dump) -> Result<Tensor> {
            dump.put("layer.0", x)?;
            x + 1.0
        }
        let x = Tensor::ones((1, 3, 4), DType::F32, &dev)?;
        let mut dump = Dump::create(&path)?;
        let mut y = forward(&x, &mut dump)?;
        dump.finish()?;
        let mut off = Dump::disabled();
        assert!(!off.is_enabled());
        for _ in 0..3 {
            y = forward(&y, &mut off)?; // the same name again: kept nowhere, no "already put"
        }
        assert_eq!(y.sum_all()?.to_scalar::<f32>()?, 12.0 * 5.0); // 1, then 4 forwards
        let e = off.put("layer3", &x).unwrap_err().to_string();
        assert!(e.contains("unknown name"), "{e}");
        off.finish()?;
        let back = candle_core::safetensors::load(&path, &dev)?;
        assert_eq!(back["layer.0"].to_vec2::<f32>()?, vec![vec![1f32; 4]; 3]);
        Ok(())
    }
}
