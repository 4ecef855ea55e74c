//! The VarBuilder every runner loads safetensors through.
//!
//! It is candle's own `MmapedSafetensors` (the same file routing, the same `load` then
//! `to_dtype` conversion, the same error texts as `VarBuilder::from_mmaped_safetensors`) with two
//! changes that touch only memory, never values:
//! - once a tensor is converted, its mapped pages are handed back to the kernel
//!   (`madvise(MADV_DONTNEED)`). With candle's loader every page of the file stays in the
//!   process's RSS next to the converted weights: 1.5x the f32 weights for an f32 run of a bf16
//!   checkpoint, 1.0x for an f16 one, where the weights alone are 1.0x and 0.5x.
//! - a name asked for again at the same dtype (a tied lm_head, the per-layer copy of the forward
//!   built after the library's model, mixtral's rebuild for a fresh KV cache) gets the tensor
//!   already loaded. candle tensors are reference-counted, so the weights are resident once and
//!   read from disk once.

use candle_core::safetensors::{Load, MmapedSafetensors};
use candle_core::{DType, Device, DeviceLocation, Shape, Tensor};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

struct SharedWeights {
    files: MmapedSafetensors,
    loaded: Mutex<HashMap<(String, DType, DeviceLocation), Tensor>>,
}

impl SharedWeights {
    fn load(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let key = (name.to_string(), dtype, dev.location());
        if let Some(t) = self.loaded.lock().unwrap().get(&key) {
            return Ok(t.clone());
        }
        let view = self.files.get(name)?;
        // `load` copies out of the mapping (Tensor::from_slice), so the pages are free afterwards.
        let tensor = view.load(dev)?.to_dtype(dtype)?;
        release_pages(view.data());
        self.loaded.lock().unwrap().insert(key, tensor.clone());
        Ok(tensor)
    }
}

/// Drops the process's mapping of these bytes' pages; the file is read-only, so a later touch
/// (a neighbouring tensor on a shared page) reads the same bytes back from the page cache.
#[cfg(unix)]
fn release_pages(bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = bytes.as_ptr() as usize / page * page;
    let end = (bytes.as_ptr() as usize + bytes.len()).div_ceil(page) * page;
    // SAFETY: [start, end) lies inside one read-only file mapping (the mapping starts on a page and
    // spans whole pages); MADV_DONTNEED on a file mapping discards no data, it only unmaps pages.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED);
    }
}

#[cfg(not(unix))]
fn release_pages(_: &[u8]) {}

impl SimpleBackend for SharedWeights {
    fn get(&self, s: Shape, name: &str, _: Init, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let tensor = self.load(name, dtype, dev)?;
        // The check and the error of candle-nn's `SimpleBackend for MmapedSafetensors`.
        if tensor.shape() != &s {
            Err(candle_core::Error::UnexpectedShape {
                msg: format!("shape mismatch for {name}"),
                expected: s,
                got: tensor.shape().clone(),
            }
            .bt())?
        }
        Ok(tensor)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        self.load(name, dtype, dev)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.files.get(name).is_ok()
    }
}

/// `VarBuilder::from_mmaped_safetensors(files, dtype, device)`, with the weights resident once
/// (see the module doc).
pub fn shared_weights(files: &[PathBuf], dtype: DType, device: &Device) -> candle_core::Result<VarBuilder<'static>> {
    // SAFETY: as in candle's `from_mmaped_safetensors`: the files are mapped read-only, and
    // portkit never writes a checkpoint it reads.
    let files = unsafe { MmapedSafetensors::multi(files)? };
    let backend = SharedWeights { files, loaded: Mutex::new(HashMap::new()) };
    Ok(VarBuilder::from_backend(Box::new(backend), dtype, device.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_checkpoint(dir: &std::path::Path) -> PathBuf {
        let a = Tensor::arange(0f32, 6f32, &Device::Cpu).unwrap().reshape((2, 3)).unwrap().to_dtype(DType::BF16).unwrap();
        let b = Tensor::new(&[1.5f32, -2.25], &Device::Cpu).unwrap();
        let path = dir.join("model.safetensors");
        candle_core::safetensors::save(&HashMap::from([("a".to_string(), a), ("b".to_string(), b)]), &path).unwrap();
        path
    }

    #[test]
    fn same_values_and_errors_as_candles_loader() {
        let dir = std::env::temp_dir().join(format!("portkit-weights-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = vec![write_checkpoint(&dir)];
        let ours = shared_weights(&files, DType::F32, &Device::Cpu).unwrap();
        let candles = unsafe { VarBuilder::from_mmaped_safetensors(&files, DType::F32, &Device::Cpu).unwrap() };
        for (name, shape) in [("a", (2, 3)), ("b", (2, 1))] {
            let shape: Shape = if name == "b" { (2,).into() } else { shape.into() };
            let x = ours.get(shape.clone(), name).unwrap();
            let y = candles.get(shape, name).unwrap();
            assert_eq!(x.flatten_all().unwrap().to_vec1::<f32>().unwrap(), y.flatten_all().unwrap().to_vec1::<f32>().unwrap());
        }
        // First line only: with RUST_BACKTRACE set, `.bt()` appends each loader's own backtrace.
        let err = |vb: &VarBuilder, shape: (usize, usize), name: &str| {
            vb.get(shape, name).unwrap_err().to_string().lines().next().unwrap().to_string()
        };
        assert_eq!(err(&ours, (3, 2), "a"), err(&candles, (3, 2), "a"));
        assert_eq!(err(&ours, (1, 1), "missing"), err(&candles, (1, 1), "missing"));
        assert!(ours.contains_tensor("a") && !ours.contains_tensor("missing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_name_asked_twice_shares_one_tensor() {
        let dir = std::env::temp_dir().join(format!("portkit-weights-shared-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = vec![write_checkpoint(&dir)];
        let vb = shared_weights(&files, DType::F32, &Device::Cpu).unwrap();
        let first = vb.get((2, 3), "a").unwrap();
        let again = vb.get((2, 3), "a").unwrap();
        assert_eq!(first.id(), again.id(), "the second request must not load a second copy");
        let f16 = vb.get_with_hints_dtype((2, 3), "a", Init::Const(0.), DType::F16).unwrap();
        assert_eq!(f16.dtype(), DType::F16, "another dtype is another tensor");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
