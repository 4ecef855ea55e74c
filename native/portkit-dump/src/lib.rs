//! Write what your own candle program computes in the layout `portkit compare` reads, so that
//! `portkit compare ref.safetensors yours.safetensors` names the first layer where your port
//! leaves transformers (`portkit reference` writes the other side).
//!
//! ```no_run
//! # use candle_core::{Device, Tensor};
//! # fn main() -> candle_core::Result<()> {
//! let mut dump = portkit_dump::Dump::create("candle.safetensors")?;
//! let x = Tensor::zeros((1, 5, 64), candle_core::DType::F32, &Device::Cpu)?;
//! dump.put("layer.3", &x)?; // [1, T, hidden] is stored as [T, hidden]
//! dump.finish()?;
//! # Ok(()) }
//! ```
//!
//! The layout (one sequence, batch dimension dropped):
//!
//! | name | shape | what |
//! |---|---|---|
//! | `ids` | `[T]` integer | the prompt; compare refuses a dump whose ids differ from the reference's |
//! | `embeddings` | `[T, hidden]` | the token embeddings |
//! | `layer.N` | `[T, hidden]` | the hidden state after decoder layer N |
//! | `norm` | `[T, hidden]` | after the final norm |
//! | `logits` | `[T, vocab]` or `[vocab]` | every position, or only the last |
//! | `greedy` | `[N]` integer | greedy continuation of the prompt |
//! | `greedy.logits` | `[N, vocab]` | row k: the logits that chose greedy token k (optional) |
//!
//! Any subset may be written; compare compares what is there. Tensors are copied to the CPU
//! and kept in their dtype (f32, f16, bf16; integers for `ids` and `greedy`).

use candle_core::{Device, Error, Result, Tensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a name holds, and so which shapes it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `ids`, `greedy`: rank 1, integer.
    Tokens,
    /// `embeddings`, `layer.N`, `norm`: `[T, hidden]`.
    Hidden,
    /// `logits`: `[T, vocab]` or `[vocab]`.
    Logits,
}

fn kind_of(name: &str) -> Option<Kind> {
    match name {
        "ids" | "greedy" => Some(Kind::Tokens),
        "embeddings" | "norm" => Some(Kind::Hidden),
        "logits" | "greedy.logits" => Some(Kind::Logits),
        _ => {
            let n = name.strip_prefix("layer.")?;
            let canonical = !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (n == "0" || !n.starts_with('0'));
            canonical.then_some(Kind::Hidden)
        }
    }
}

/// One dump file, written by [`Dump::finish`].
pub struct Dump {
    path: PathBuf,
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
        Ok(Self { path, tensors: HashMap::new() })
    }

    /// Keeps a copy of `tensor` under `name` (see the layout above). A leading batch
    /// dimension of 1 is dropped; a name outside the layout, a batch over 1, a wrong rank or
    /// a name given twice is an error here, not a surprise in `portkit compare`.
    pub fn put(&mut self, name: &str, tensor: &Tensor) -> Result<()> {
        let kind = kind_of(name).ok_or_else(|| {
            Error::Msg(format!(
                "portkit-dump: unknown name {name:?} (expected ids, embeddings, layer.N, norm, logits, greedy or greedy.logits)"
            ))
        })?;
        if self.tensors.contains_key(name) {
            return Err(Error::Msg(format!("portkit-dump: {name:?} was already put")));
        }
        let stored = normalise(name, kind, tensor)?;
        self.tensors.insert(name.to_string(), stored);
        Ok(())
    }

    /// Writes the file (through a temporary name, so a reader never sees half of it).
    pub fn finish(self) -> Result<()> {
        if self.tensors.is_empty() {
            return Err(Error::Msg(format!("portkit-dump: nothing was put into {}", self.path.display())));
        }
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".partial");
        let tmp = PathBuf::from(tmp);
        candle_core::safetensors::save(&self.tensors, &tmp)?;
        std::fs::rename(&tmp, &self.path)?;
        Ok(())
    }
}

fn normalise(name: &str, kind: Kind, tensor: &Tensor) -> Result<Tensor> {
    let rank = match kind {
        Kind::Tokens => 1,
        Kind::Hidden => 2,
        Kind::Logits => tensor.rank().clamp(1, 2),
    };
    let mut t = tensor.clone();
    while t.rank() > rank {
        let lead = t.dims()[0];
        if lead != 1 {
            return Err(Error::Msg(format!(
                "portkit-dump: {name:?} has shape {:?}; a dump holds one sequence (batch 1)",
                tensor.dims()
            )));
        }
        t = t.squeeze(0)?;
    }
    if t.rank() != rank {
        let want = match kind {
            Kind::Tokens => "[T] token ids",
            Kind::Hidden => "[T, hidden]",
            Kind::Logits => "[T, vocab] or [vocab]",
        };
        return Err(Error::Msg(format!("portkit-dump: {name:?} has shape {:?}, expected {want}", tensor.dims())));
    }
    if kind == Kind::Tokens && t.dtype().is_float() {
        return Err(Error::Msg(format!("portkit-dump: {name:?} holds token ids: give an integer tensor, not {:?}", t.dtype())));
    }
    t.to_device(&Device::Cpu)?.contiguous()
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
}
