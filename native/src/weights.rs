//! The VarBuilder every runner loads safetensors through.
//!
//! It is candle's own `MmapedSafetensors` (the same file routing, the same `load` then
//! `to_dtype` conversion, the same error texts as `VarBuilder::from_mmaped_safetensors`) with
//! changes that touch only memory and time, never values:
//! - once a tensor is converted, its mapped pages are handed back to the kernel
//!   (`madvise(MADV_DONTNEED)`). With candle's loader every page of the file stays in the
//!   process's RSS next to the converted weights: 1.5x the f32 weights for an f32 run of a bf16
//!   checkpoint, 1.0x for an f16 one, where the weights alone are 1.0x and 0.5x.
//! - a name asked for again at the same dtype (a tied lm_head, the per-layer copy of the forward
//!   built after the library's model, mixtral's rebuild for a fresh KV cache) gets the tensor
//!   already loaded. candle tensors are reference-counted, so the weights are resident once and
//!   read from disk once.
//! - on the CPU, the float conversions a checkpoint meets (bf16 or f16 to f32, bf16 to f16, f32 to
//!   f16 or bf16) run in one pass from the mapped bytes on every core, with the very per-element
//!   function candle's CPU `to_dtype` maps with (cpu_backend/mod.rs), so the bits are the same.
//!   candle copies the bytes into a tensor first and converts on one thread: 4.8 s of a 6 s load
//!   of 1.1B bf16 weights in f32. A tensor loaded in its stored dtype is copied the same way.
//! - the kernel is asked to map each tensor's file pages in one call before the read, and each
//!   converted buffer's pages as the thread that writes them starts (`fault_in`). The CPU conversions map,
//!   read and hand back a tensor's pages `SLAB` bytes at a time, so a load's RSS never holds a
//!   whole tensor twice (the 135M checkpoint's 113 MiB embeddings, mapped then converted, had
//!   added their size to the load's peak).
//! - while `keep_weights(files)` holds, the runners that load those files share one set of
//!   loaded tensors: verify's run with a finding's config patch reuses the tensors of the run as
//!   written instead of reading and converting the checkpoint again.

use candle_core::safetensors::{Load, MmapedSafetensors};
use candle_core::{DType, Device, DeviceLocation, Shape, Tensor, WithDType};
use candle_nn::var_builder::SimpleBackend;
use candle_nn::{Init, VarBuilder};
use half::{bf16, f16};
use safetensors::tensor::{Dtype as Stored, TensorView};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

type Loaded = Arc<Mutex<HashMap<(String, DType, DeviceLocation), Tensor>>>;

struct SharedWeights {
    files: MmapedSafetensors,
    loaded: Loaded,
}

/// The weight files whose loaded tensors outlive their runner (`keep_weights`), and the tensors.
static KEPT: Mutex<Option<(Vec<PathBuf>, Loaded)>> = Mutex::new(None);

/// From now on, the runners that load exactly `files` share their loaded tensors, until the
/// next call; `None` drops the tensors kept (freed once no runner holds them).
pub fn keep_weights(files: Option<Vec<PathBuf>>) {
    *KEPT.lock().unwrap() = files.map(|f| (f, Loaded::default()));
}

/// How many tensors `keep_weights` holds now: none before the first runner on its files loads.
pub fn kept_tensors() -> usize {
    KEPT.lock().unwrap().as_ref().map_or(0, |(_, loaded)| loaded.lock().unwrap().len())
}

/// The kept tensors when `files` are the kept ones, else a fresh set of this runner's own.
fn loaded_for(files: &[PathBuf]) -> Loaded {
    match KEPT.lock().unwrap().as_ref() {
        Some((kept, loaded)) if kept.as_slice() == files => loaded.clone(),
        _ => Loaded::default(),
    }
}

impl SharedWeights {
    fn load(&self, name: &str, dtype: DType, dev: &Device) -> candle_core::Result<Tensor> {
        let key = (name.to_string(), dtype, dev.location());
        if let Some(t) = self.loaded.lock().unwrap().get(&key) {
            return Ok(t.clone());
        }
        let view = self.files.get(name)?;
        // Both paths copy out of the mapping, so the pages are free afterwards.
        let tensor = match convert_on_cpu(&view, dtype, dev) {
            Some(t) => t?, // maps and hands back the pages slab by slab
            None => {
                advise_pages(view.data(), MAP_AHEAD);
                let t = view.load(dev)?.to_dtype(dtype);
                release_pages(view.data());
                t?
            }
        };
        self.loaded.lock().unwrap().insert(key, tensor.clone());
        Ok(tensor)
    }
}

/// `view.load(dev)?.to_dtype(dtype)` for the CPU float conversions (see the module doc); `None`
/// for everything else, which takes candle's own path.
fn convert_on_cpu(view: &TensorView<'_>, dtype: DType, dev: &Device) -> Option<candle_core::Result<Tensor>> {
    if !dev.is_cpu() {
        return None;
    }
    let (data, shape) = (view.data(), view.shape());
    let b16 = |c: &[u8]| u16::from_le_bytes([c[0], c[1]]);
    let b32 = |c: &[u8]| u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    Some(match (view.dtype(), dtype) {
        (Stored::BF16, DType::F32) => map_elements(data, shape, 2, |c| bf16::from_bits(b16(c)).to_f32()),
        (Stored::F16, DType::F32) => map_elements(data, shape, 2, |c| f16::from_bits(b16(c)).to_f32()),
        (Stored::BF16, DType::F16) => map_elements(data, shape, 2, |c| f16::from_f32(bf16::from_bits(b16(c)).to_f32())),
        (Stored::F32, DType::F16) => map_elements(data, shape, 4, |c| f16::from_f32(f32::from_bits(b32(c)))),
        (Stored::F32, DType::BF16) => map_elements(data, shape, 4, |c| bf16::from_f32(f32::from_bits(b32(c)))),
        // no conversion: candle copies the bytes on one thread into pages faulted 4 KiB at a time
        (Stored::F32, DType::F32) => map_elements(data, shape, 4, |c| f32::from_bits(b32(c))),
        (Stored::F16, DType::F16) => map_elements(data, shape, 2, |c| f16::from_bits(b16(c))),
        (Stored::BF16, DType::BF16) => map_elements(data, shape, 2, |c| bf16::from_bits(b16(c))),
        _ => return None,
    })
}

/// How much of a tensor's mapped file is resident at once while it is converted.
const SLAB: usize = 16 << 20;

/// Maps each `width`-byte element of `data` (a file mapping) through `f` into a new CPU tensor:
/// `SLAB` bytes at a time, each mapped in one call, converted in chunks over the available cores
/// and handed back.
fn map_elements<T: WithDType>(data: &[u8], shape: &[usize], width: usize, f: impl Fn(&[u8]) -> T + Sync) -> candle_core::Result<Tensor> {
    let n = data.len() / width;
    let mut out: Vec<T> = Vec::with_capacity(n);
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let slab = SLAB / width;
    for (slab_out, slab_in) in out.spare_capacity_mut()[..n].chunks_mut(slab).zip(data.chunks(slab * width)) {
        advise_pages(slab_in, MAP_AHEAD);
        let per = slab_out.len().div_ceil(threads).max(1 << 16);
        std::thread::scope(|s| {
            for (chunk, src) in slab_out.chunks_mut(per).zip(slab_in.chunks(per * width)) {
                let f = &f;
                s.spawn(move || {
                    fault_in(chunk);
                    for (o, c) in chunk.iter_mut().zip(src.chunks_exact(width)) {
                        o.write(f(c));
                    }
                });
            }
        });
        release_pages(slab_in);
    }
    // SAFETY: the chunks cover [0, n) and every element of each was written above.
    unsafe { out.set_len(n) };
    Tensor::from_vec(out, shape, &Device::Cpu)
}

/// Maps a fresh buffer's pages, about to be written, in one call instead of one fault per 4 KiB
/// (Linux 5.14+; an older kernel refuses the advice and the writes fault as before). Not huge
/// pages: with MADV_HUGEPAGE each fault may wait for the kernel to compact memory. A fresh-process
/// f32 load of the 1.1B shape took 1.45-2.7 s with them (13.4 s once) against 1.03-1.12 s this
/// way, and the real 135M checkpoint's 0.23 s or 0.71-1.31 s against 0.22-0.26 s.
#[cfg(target_os = "linux")]
fn fault_in<T>(buf: &mut [std::mem::MaybeUninit<T>]) {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = (buf.as_mut_ptr() as usize).div_ceil(page) * page;
    let end = (buf.as_mut_ptr() as usize + std::mem::size_of_val(buf)) / page * page;
    if end > start {
        // SAFETY: [start, end) lies inside this buffer's allocation; the advice changes no data.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_POPULATE_WRITE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn fault_in<T>(_: &mut [std::mem::MaybeUninit<T>]) {}

/// Drops the process's mapping of these bytes' pages once they are converted; the file is
/// read-only, so a later touch (a neighbouring tensor on a shared page) reads the same bytes back
/// from the page cache.
fn release_pages(bytes: &[u8]) {
    advise_pages(bytes, RELEASE);
}

/// Maps a tensor's pages in one call before it is read, instead of one fault per 4 KiB page
/// (Linux 5.14+; older kernels refuse the advice and the reads fault as before).
#[cfg(target_os = "linux")]
const MAP_AHEAD: i32 = libc::MADV_POPULATE_READ;
#[cfg(all(unix, not(target_os = "linux")))]
const MAP_AHEAD: i32 = libc::MADV_WILLNEED;
#[cfg(not(unix))]
const MAP_AHEAD: i32 = 0;
#[cfg(unix)]
const RELEASE: i32 = libc::MADV_DONTNEED;
#[cfg(not(unix))]
const RELEASE: i32 = 0;

/// `madvise(advice)` over the whole pages these mapped bytes touch.
#[cfg(unix)]
fn advise_pages(bytes: &[u8], advice: i32) {
    if bytes.is_empty() {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
    let start = bytes.as_ptr() as usize / page * page;
    let end = (bytes.as_ptr() as usize + bytes.len()).div_ceil(page) * page;
    // SAFETY: [start, end) lies inside one read-only file mapping (the mapping starts on a page and
    // spans whole pages). Neither advice changes data: MADV_DONTNEED on a file mapping only
    // unmaps pages, the populate/willneed advice only maps them.
    unsafe {
        libc::madvise(start as *mut libc::c_void, end - start, advice);
    }
}

#[cfg(not(unix))]
fn advise_pages(_: &[u8], _: i32) {}

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

    // SimpleBackend::get_unchecked arrived in candle-nn 0.9.2 (var_builder.rs 0.9.2:64)
    #[cfg(not(feature = "before-0-9-2"))]
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
    let loaded = loaded_for(files);
    // SAFETY: as in candle's `from_mmaped_safetensors`: the files are mapped read-only, and
    // portkit never writes a checkpoint it reads.
    let files = unsafe { MmapedSafetensors::multi(files)? };
    let backend = SharedWeights { files, loaded };
    Ok(VarBuilder::from_backend(Box::new(backend), dtype, device.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh scratch directory of this test process.
    fn scratch(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("portkit-weights-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn write_checkpoint(dir: &std::path::Path) -> PathBuf {
        let a = Tensor::arange(0f32, 6f32, &Device::Cpu).unwrap().reshape((2, 3)).unwrap().to_dtype(DType::BF16).unwrap();
        let b = Tensor::new(&[1.5f32, -2.25], &Device::Cpu).unwrap();
        let path = dir.join("model.safetensors");
        candle_core::safetensors::save(&HashMap::from([("a".to_string(), a), ("b".to_string(), b)]), &path).unwrap();
        path
    }

    #[test]
    fn same_values_and_errors_as_candles_loader() {
        let dir = scratch("values");
        let files = vec![write_checkpoint(&dir)];
        let ours = shared_weights(&files, DType::F32, &Device::Cpu).unwrap();
        let candles = unsafe { VarBuilder::from_mmaped_safetensors(&files, DType::F32, &Device::Cpu).unwrap() };
        for (name, shape) in [("a", Shape::from((2, 3))), ("b", Shape::from(2))] {
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

    /// While `keep_weights` holds a runner's files, the next runner on them gets the very tensors
    /// the first loaded (candle tensors share their storage: same id); other files, a dtype the
    /// first did not load, and runners after the release load their own.
    #[test]
    fn kept_weights_are_shared_between_runners_until_released() {
        let dir = scratch("kept");
        let files = vec![write_checkpoint(&dir)];
        let other = scratch("kept-other");
        let others = vec![write_checkpoint(&other)];
        let id = |files: &[PathBuf], dtype: DType| shared_weights(files, dtype, &Device::Cpu).unwrap().get((2, 3), "a").unwrap().id();
        assert_ne!(id(&files, DType::F32), id(&files, DType::F32), "not kept: each runner loads its own");
        keep_weights(Some(files.clone()));
        assert_eq!(kept_tensors(), 0);
        let first = id(&files, DType::F32);
        assert_eq!(kept_tensors(), 1);
        assert_eq!(first, id(&files, DType::F32));
        assert_ne!(first, id(&files, DType::F16));
        assert_ne!(id(&others, DType::F32), id(&others, DType::F32));
        keep_weights(None);
        assert_eq!(kept_tensors(), 0);
        assert_ne!(first, id(&files, DType::F32));
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&other).unwrap();
    }

    /// Every fast conversion (and copy) against candle's own `load` then `to_dtype`, bit for bit, on values
    /// that round differently (ties, subnormals, out of f16's range, NaN, infinities), over more
    /// elements than one thread's chunk and more bytes than one `SLAB`, at either width.
    #[test]
    fn fast_conversions_have_candles_bits() {
        let dir = scratch("bits");
        let special = [0.0f32, -0.0, 1.0, 1.0 + f32::EPSILON, 65504.0, 65520.0, 1e6, 6e-8, 1e-40, f32::NAN, f32::INFINITY, -f32::INFINITY, 0.1, -3.3];
        let n = SLAB / 2 + 300_001;
        let values: Vec<f32> = (0..n).map(|i| if i < special.len() { special[i] } else { ((i as f32) * 0.618).sin() * 10f32.powi((i % 13) as i32 - 6) }).collect();
        let base = Tensor::from_vec(values, n, &Device::Cpu).unwrap();
        let stored = HashMap::from([
            ("f32".to_string(), base.clone()),
            ("bf16".to_string(), base.to_dtype(DType::BF16).unwrap()),
            ("f16".to_string(), base.to_dtype(DType::F16).unwrap()),
        ]);
        let path = dir.join("model.safetensors");
        candle_core::safetensors::save(&stored, &path).unwrap();
        let files = vec![path];
        let bits = |t: Tensor| t.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let conversions = [("bf16", DType::F32), ("f16", DType::F32), ("bf16", DType::F16), ("f32", DType::F16), ("f32", DType::BF16)];
        let copies = [("f32", DType::F32), ("f16", DType::F16), ("bf16", DType::BF16)];
        for (name, to) in conversions.into_iter().chain(copies) {
            let ours = shared_weights(&files, to, &Device::Cpu).unwrap().get(n, name).unwrap();
            let candles = unsafe { VarBuilder::from_mmaped_safetensors(&files, to, &Device::Cpu).unwrap() }.get(n, name).unwrap();
            assert_eq!(ours.dtype(), to);
            assert!(bits(ours) == bits(candles), "{name} -> {to:?} differs from candle's conversion");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_name_asked_twice_shares_one_tensor() {
        let dir = scratch("shared");
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
