//! Which tensors a family's candle module asks its VarBuilder for: the model is built through a
//! backend that records every request and hands back zeros of the requested shape. This is the
//! oracle portkit's weight rules are tested against. The zeros are real CPU tensors, so memory is
//! the whole model in f32: use it on tiny configs only.

use crate::failure::{guarded, Outcome};
use crate::family::{parse, Family};
use candle_core::{DType, Device, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// A name candle requested and the shape it asked for (`None` for `get_unchecked`, which names no shape).
pub type Request = (String, Option<Vec<usize>>);

struct Recorder {
    /// `None`: every name is present. `Some`: only these names are (a checkpoint's header).
    available: Option<HashSet<String>>,
    log: Arc<Mutex<Vec<Request>>>,
}

impl Recorder {
    fn present(&self, name: &str) -> bool {
        self.available.as_ref().is_none_or(|a| a.contains(name))
    }

    fn missing(&self, name: &str) -> candle_core::Error {
        // The error the safetensors backend gives for an absent name (candle-core safetensors.rs).
        candle_core::Error::CannotFindTensor { path: name.to_string() }.bt()
    }
}

impl SimpleBackend for Recorder {
    fn get(&self, s: Shape, name: &str, _: Init, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.log.lock().unwrap().push((name.to_string(), Some(s.dims().to_vec())));
        if !self.present(name) {
            return Err(self.missing(name));
        }
        Tensor::zeros(s, dtype, dev)
    }

    // SimpleBackend::get_unchecked arrived in candle-nn 0.9.2 (var_builder.rs 0.9.2:64)
    #[cfg(not(feature = "before-0-9-2"))]
    fn get_unchecked(&self, name: &str, _: DType, _: &Device) -> candle_core::Result<Tensor> {
        self.log.lock().unwrap().push((name.to_string(), None));
        if !self.present(name) {
            return Err(self.missing(name));
        }
        candle_core::bail!("portkit's recording backend cannot answer get_unchecked({name}): no shape is known")
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.present(name)
    }
}

/// What the family's model requests, in order, first request of each name only, and candle's
/// error (or caught panic) text if building the model failed part-way.
pub fn requested_tensors(
    family: Family,
    config_json: &str,
    available: Option<Vec<String>>,
) -> Outcome<(Vec<Request>, Option<String>)> {
    let parsed = parse(family, config_json)?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let backend = Recorder { available: available.map(|v| v.into_iter().collect()), log: log.clone() };
    let built = guarded(|| {
        let vb = VarBuilder::from_backend(Box::new(backend), DType::F32, Device::Cpu);
        parsed.build(vb, DType::F32).map(|_| ()).map_err(Into::into)
    });
    let mut seen = HashSet::new();
    let requested = log.lock().unwrap().iter().filter(|(n, _)| seen.insert(n.clone())).cloned().collect();
    Ok((requested, built.err().map(|f| f.to_string())))
}
