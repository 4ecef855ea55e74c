//! The Python surface (`portkit_native._native`). All conversion between candle's failures and
//! Python exceptions lives here; the compute releases the GIL.

use crate::array::Array;
use crate::chat_template::{self, Renderer, Switches};
use crate::config;
use crate::device::{compiled_devices, parse_device, parse_dtype};
use crate::encoder::{self, Encoder, EncoderRunner as EncoderCore};
use crate::failure::Failure;
use crate::family::{self, Family, FamilyRunner as FamilyCore, CAPTURE_FAMILIES};
use crate::gguf::{GgufRunner as GgufCore, CAPTURE_LOADERS, LOADERS};
use crate::llama::LlamaRunner as LlamaCore;
use crate::requested;
use crate::tokenizer::CrateTokenizer;
use numpy::ndarray::{ArrayD, IxDyn};
use crate::generation_copy::Sampling;
use crate::sampling::{Call, Sampler};
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayDyn, PyReadonlyArray2};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyNotImplementedError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

create_exception!(portkit_native, NativeError, PyException, "Base class of every error portkit_native raises for candle.");
create_exception!(portkit_native, ConfigError, NativeError, "candle's serde refused the config JSON; the message is serde_json's, unchanged.");
create_exception!(portkit_native, CandleError, NativeError, "candle returned an Err; the message is candle's, unchanged.");
create_exception!(portkit_native, CandlePanic, NativeError, "candle panicked; the panic was caught and the message keeps candle's location and text.");
create_exception!(portkit_native, DeviceUnavailableError, NativeError, "The device is not built into this wheel (or not present); the message says how to get it.");
create_exception!(portkit_native, TokenizerError, NativeError, "The tokenizers crate (the built candle-core's: 0.23.2 in the wheel) refused a tokenizer.json or an encode; the message is the crate's, unchanged.");
create_exception!(portkit_native, ChatTemplateError, NativeError, "A chat-template environment (minijinja 2.14.0, set up as candle-examples or mistral.rs sets it up) refused the template; the message is the program's, unchanged.");

fn to_py(f: Failure) -> PyErr {
    match f {
        Failure::Config(m) => ConfigError::new_err(m),
        Failure::Candle(m) => CandleError::new_err(m),
        Failure::Panic(m) => CandlePanic::new_err(m),
        Failure::DeviceUnavailable(m) => DeviceUnavailableError::new_err(m),
        Failure::Invalid(m) => PyValueError::new_err(m),
        Failure::NotFound(m) => PyFileNotFoundError::new_err(m),
        Failure::NotImplemented(m) => PyNotImplementedError::new_err(m),
        Failure::Tokenizer(m) => TokenizerError::new_err(m),
        Failure::Template(m) => ChatTemplateError::new_err(m),
    }
}

fn array_to_py<'py>(py: Python<'py>, a: Array) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let nd = ArrayD::from_shape_vec(IxDyn(&a.shape), a.data).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(nd.into_pyarray(py))
}

fn family_of(key: &str) -> PyResult<Family> {
    Family::from_key(key).map_err(to_py)
}

/// candle's effective config for `family` as a JSON string (the Python wrapper parses it into a dict).
#[pyfunction]
#[pyo3(signature = (config_json, family = "llama"))]
fn candle_config_json(config_json: &str, family: &str) -> PyResult<String> {
    let parsed = family::parse(family_of(family)?, config_json).map_err(to_py)?;
    Ok(parsed.effective().to_string())
}

fn encoder_of(key: &str) -> PyResult<Encoder> {
    Encoder::from_key(key).map_err(to_py)
}

/// The encoder module's `Config` after serde, as JSON (ValueError with serde's words on refusal).
#[pyfunction]
fn encoder_config_json(config_json: &str, family: &str) -> PyResult<String> {
    let m = encoder::effective_config(encoder_of(family)?, config_json).map_err(to_py)?;
    Ok(serde_json::Value::Object(m).to_string())
}

#[pyfunction]
fn encoder_families() -> Vec<&'static str> {
    Encoder::ALL.iter().map(|e| e.key()).collect()
}

/// One candle encoder module (bert, distilbert, xlm_roberta, modernbert, jina_bert, nomic_bert)
/// on a checkpoint: its public forward's last hidden state.
#[pyclass(module = "portkit_native")]
struct EncoderRunner {
    core: EncoderCore,
}

#[pymethods]
impl EncoderRunner {
    #[new]
    #[pyo3(signature = (family, weight_files, config_json, dtype = "f32", device = "cpu"))]
    fn new(py: Python<'_>, family: &str, weight_files: Vec<PathBuf>, config_json: String, dtype: &str, device: &str) -> PyResult<Self> {
        let encoder = encoder_of(family)?;
        let dtype = parse_dtype(dtype).map_err(to_py)?;
        let device = parse_device(device).map_err(to_py)?;
        let core = py.detach(|| EncoderCore::load(encoder, weight_files, &config_json, dtype, device)).map_err(to_py)?;
        Ok(Self { core })
    }

    #[getter]
    fn family(&self) -> &'static str {
        self.core.encoder().key()
    }

    fn config_json(&self) -> String {
        serde_json::Value::Object(self.core.config().clone()).to_string()
    }

    /// [rows, seq, hidden]; rows of one length. `mask` in the module's own convention, None: the
    /// module's call without one.
    #[pyo3(signature = (ids, type_ids = None, mask = None))]
    fn hidden_states<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<Vec<u32>>,
        type_ids: Option<Vec<Vec<u32>>>,
        mask: Option<Vec<Vec<u32>>>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let a = py.detach(|| self.core.hidden_states(&ids, type_ids.as_deref(), mask.as_deref())).map_err(to_py)?;
        array_to_py(py, a)
    }

    /// [rows, seq, hidden] through the one model the runner keeps across calls: for qwen3 its
    /// KV cache grows with every call, as in a program that loads `qwen3::Model` once; the
    /// other modules keep no state and give `hidden_states(ids)`.
    fn hidden_states_one_model<'py>(&self, py: Python<'py>, ids: Vec<Vec<u32>>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let a = py.detach(|| self.core.hidden_states_one_model(&ids)).map_err(to_py)?;
        array_to_py(py, a)
    }

    /// The capture copy's `embeddings`, `layers.N` and `layers.N.<sub-layer>` ([rows, seq,
    /// hidden] each) for the same inputs; refused for an encoder with no copy
    /// (`encoder_capture_families()`).
    #[pyo3(signature = (ids, type_ids = None, mask = None))]
    fn capture<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<Vec<u32>>,
        type_ids: Option<Vec<Vec<u32>>>,
        mask: Option<Vec<Vec<u32>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let pairs = py.detach(|| self.core.capture(&ids, type_ids.as_deref(), mask.as_deref())).map_err(to_py)?;
        captured_to_dict(py, pairs)
    }
}

/// Hands the heap's free memory back to the OS and says whether it could. glibc keeps freed
/// blocks under its mmap threshold (32 MiB at most) in the heap, so a dropped runner's weights
/// would stay in RSS while the reference (or the next run) loads: 1.8 of 2.2 GiB for 1.1B f16.
#[pyfunction]
fn release_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim has no preconditions.
        unsafe { libc::malloc_trim(0) };
        true
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    false
}

/// While set, the runners that load exactly these weight files share one set of loaded tensors
/// (a run with a patched config reuses the tensors of the run before it); `None` drops them.
#[pyfunction]
#[pyo3(signature = (files))]
fn keep_weights(files: Option<Vec<String>>) {
    crate::weights::keep_weights(files.map(|f| f.into_iter().map(std::path::PathBuf::from).collect()))
}

/// How many loaded tensors `keep_weights` holds now.
#[pyfunction]
fn kept_tensors() -> usize {
    crate::weights::kept_tensors()
}

/// The number of threads candle's CPU kernels split work into (`RAYON_NUM_THREADS` when it is a
/// positive integer, else the physical cores), as candle-core itself computes it.
#[pyfunction]
fn cpu_threads() -> usize {
    candle_core::utils::get_num_threads()
}

/// The family keys this wheel has a config binding and a runner for.
#[pyfunction]
fn families() -> Vec<&'static str> {
    Family::ALL.iter().map(|f| f.key()).collect()
}

/// The encoders whose layers and sub-layers come from a copy proven bit-identical to the library.
#[pyfunction]
fn encoder_capture_families() -> Vec<&'static str> {
    EncoderCore::CAPTURED.iter().map(|e| e.key()).collect()
}

/// The families whose per-layer capture comes from a copy proven bit-identical to the library.
#[pyfunction]
fn capture_families() -> Vec<&'static str> {
    CAPTURE_FAMILIES.iter().map(|f| f.key()).collect()
}

/// The GGUF loader keys `GgufRunner` accepts.
#[pyfunction]
fn gguf_loaders() -> Vec<&'static str> {
    LOADERS.to_vec()
}

/// The GGUF loaders whose per-layer capture comes from a copy proven bit-identical to the library.
#[pyfunction]
fn gguf_capture_loaders() -> Vec<&'static str> {
    CAPTURE_LOADERS.to_vec()
}

/// (requested, error): every (name, shape) the family's model asked its VarBuilder for, in order,
/// and candle's error text if building stopped (None when it completed).
#[pyfunction]
#[pyo3(signature = (family, config_json, available = None))]
fn requested_tensors(
    py: Python<'_>,
    family: &str,
    config_json: String,
    available: Option<Vec<String>>,
) -> PyResult<(Vec<(String, Option<Vec<usize>>)>, Option<String>)> {
    let family = family_of(family)?;
    py.detach(|| requested::requested_tensors(family, &config_json, available)).map_err(to_py)
}

#[pyfunction]
fn build_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("candle_version", env!("PORTKIT_CANDLE_VERSION"))?;
    d.set_item("tokenizers_version", env!("PORTKIT_TOKENIZERS_VERSION"))?;
    d.set_item("devices", compiled_devices())?;
    d.set_item("accelerate", cfg!(target_os = "macos"))?;
    d.set_item("flash_attn", false)?;
    d.set_item("debug_assertions", cfg!(debug_assertions))?;
    Ok(d)
}

/// Raises DeviceUnavailableError (or ValueError for an unknown name) unless `device` can be used.
#[pyfunction]
fn check_device(device: &str) -> PyResult<()> {
    parse_device(device).map(|_| ()).map_err(to_py)
}

fn captured_to_dict<'py>(py: Python<'py>, pairs: Vec<(String, Array)>) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (name, a) in pairs {
        d.set_item(name, array_to_py(py, a)?)?;
    }
    Ok(d)
}

/// Per-layer capture that loads only the copy of the forward (weights resident once).
#[pyfunction]
#[pyo3(signature = (weight_files, config_json, ids, dtype = "f32", cache_dtype = None, device = "cpu", family = "llama"))]
#[allow(clippy::too_many_arguments)]
fn capture_layers<'py>(
    py: Python<'py>,
    weight_files: Vec<PathBuf>,
    config_json: String,
    ids: Vec<u32>,
    dtype: &str,
    cache_dtype: Option<&str>,
    device: &str,
    family: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let family = family_of(family)?;
    let dtype = parse_dtype(dtype).map_err(to_py)?;
    let cache_dtype = cache_dtype.map(parse_dtype).transpose().map_err(to_py)?;
    let device = parse_device(device).map_err(to_py)?;
    let pairs = py
        .detach(|| family::capture_layers(family, &weight_files, &config_json, &ids, dtype, cache_dtype, &device))
        .map_err(to_py)?;
    captured_to_dict(py, pairs)
}

#[pyclass(module = "portkit_native")]
struct LlamaRunner {
    core: LlamaCore,
}

#[pymethods]
impl LlamaRunner {
    #[new]
    #[pyo3(signature = (weight_files, config_json, dtype = "f32", cache_dtype = None, device = "cpu", use_flash_attn = false))]
    fn new(
        py: Python<'_>,
        weight_files: Vec<PathBuf>,
        config_json: String,
        dtype: &str,
        cache_dtype: Option<&str>,
        device: &str,
        use_flash_attn: bool,
    ) -> PyResult<Self> {
        let dtype = parse_dtype(dtype).map_err(to_py)?;
        let cache_dtype = cache_dtype.map(parse_dtype).transpose().map_err(to_py)?;
        let device = parse_device(device).map_err(to_py)?;
        let core = py
            .detach(|| LlamaCore::load(weight_files, &config_json, dtype, cache_dtype, device, use_flash_attn))
            .map_err(to_py)?;
        Ok(Self { core })
    }

    /// candle's effective config for this runner, as JSON.
    fn config_json(&self) -> String {
        config::effective(self.core.config()).to_string()
    }

    fn last_logits<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let row = py.detach(|| self.core.last_logits(&ids)).map_err(to_py)?;
        Ok(PyArray1::from_vec(py, row))
    }

    #[pyo3(signature = (ids, prefill = 1))]
    fn teacher_forced_logits<'py>(&self, py: Python<'py>, ids: Vec<u32>, prefill: usize) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let a = py.detach(|| self.core.teacher_forced_logits(&ids, prefill)).map_err(to_py)?;
        array_to_py(py, a)
    }

    fn greedy(&self, py: Python<'_>, ids: Vec<u32>, n: usize) -> PyResult<Vec<u32>> {
        py.detach(|| self.core.greedy(&ids, n)).map_err(to_py)
    }

    /// (greedy tokens, every step's logits): `greedy` and `teacher_forced_logits` in one pass.
    fn generate<'py>(&self, py: Python<'py>, ids: Vec<u32>, n: usize) -> PyResult<(Vec<u32>, Bound<'py, PyArrayDyn<f32>>)> {
        let (tokens, rows) = py.detach(|| self.core.generate(&ids, n)).map_err(to_py)?;
        Ok((tokens, array_to_py(py, rows)?))
    }

    /// (`greedy(ids[:prefill], n)`, `teacher_forced_logits(ids, prefill)`) with the forwards they
    /// share run once (`forced::forced_and_greedy_rows`).
    fn forced_and_greedy<'py>(&self, py: Python<'py>, ids: Vec<u32>, prefill: usize, n: usize) -> PyResult<(Vec<u32>, Bound<'py, PyArrayDyn<f32>>)> {
        let (tokens, rows) = py.detach(|| self.core.forced_and_greedy(&ids, prefill, n)).map_err(to_py)?;
        Ok((tokens, array_to_py(py, rows)?))
    }

    fn capture<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyDict>> {
        let pairs = py.detach(|| self.core.capture(&ids)).map_err(to_py)?;
        captured_to_dict(py, pairs)
    }

    // --- a continuation and a batch (`chat`) ---------------------------------------------

    /// [len(segment), vocab]: row k - 1 is `forward(segment[:k], offset)` on the cache warmed
    /// with the prompt and `fed` (`chat::continuation_rows`).
    fn continuation<'py>(&self, py: Python<'py>, prompt: Vec<u32>, fed: Vec<u32>, segment: Vec<u32>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let a = py.detach(|| self.core.continuation(&prompt, &fed, &segment)).map_err(to_py)?;
        array_to_py(py, a)
    }

    /// [N, vocab]: N rows of equal length in one forward, each row's last position.
    fn batch_last_logits<'py>(&self, py: Python<'py>, rows: Vec<Vec<u32>>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let a = py.detach(|| self.core.batch_last_logits(&rows)).map_err(to_py)?;
        array_to_py(py, a)
    }
}

#[pyclass(module = "portkit_native")]
struct FamilyRunner {
    core: FamilyCore,
    config_json: String,
}

#[pymethods]
impl FamilyRunner {
    #[new]
    #[pyo3(signature = (family, weight_files, config_json, dtype = "f32", device = "cpu", cache_dtype = None))]
    fn new(
        py: Python<'_>,
        family: &str,
        weight_files: Vec<PathBuf>,
        config_json: String,
        dtype: &str,
        device: &str,
        cache_dtype: Option<&str>,
    ) -> PyResult<Self> {
        let family = family_of(family)?;
        let dtype = parse_dtype(dtype).map_err(to_py)?;
        let cache_dtype = cache_dtype.map(parse_dtype).transpose().map_err(to_py)?;
        let device = parse_device(device).map_err(to_py)?;
        let core = py
            .detach(|| FamilyCore::load(family, weight_files, &config_json, dtype, cache_dtype, device))
            .map_err(to_py)?;
        let config_json = core.parsed().effective().to_string();
        Ok(Self { core, config_json })
    }

    #[getter]
    fn family(&self) -> &'static str {
        self.core.family().key()
    }

    /// candle's effective config for this runner, as JSON.
    fn config_json(&self) -> String {
        self.config_json.clone()
    }

    fn last_logits<'py>(&mut self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let core = &mut self.core;
        let row = py.detach(|| core.last_logits(&ids)).map_err(to_py)?;
        Ok(PyArray1::from_vec(py, row))
    }

    #[pyo3(signature = (ids, prefill = 1))]
    fn teacher_forced_logits<'py>(&mut self, py: Python<'py>, ids: Vec<u32>, prefill: usize) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let core = &mut self.core;
        let a = py.detach(|| core.teacher_forced_logits(&ids, prefill)).map_err(to_py)?;
        array_to_py(py, a)
    }

    fn greedy(&mut self, py: Python<'_>, ids: Vec<u32>, n: usize) -> PyResult<Vec<u32>> {
        let core = &mut self.core;
        py.detach(|| core.greedy(&ids, n)).map_err(to_py)
    }

    /// (greedy tokens, every step's logits): `greedy` and `teacher_forced_logits` in one pass.
    fn generate<'py>(&mut self, py: Python<'py>, ids: Vec<u32>, n: usize) -> PyResult<(Vec<u32>, Bound<'py, PyArrayDyn<f32>>)> {
        let core = &mut self.core;
        let (tokens, rows) = py.detach(|| core.generate(&ids, n)).map_err(to_py)?;
        Ok((tokens, array_to_py(py, rows)?))
    }

    fn capture<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyDict>> {
        let pairs = py.detach(|| self.core.capture(&ids)).map_err(to_py)?;
        captured_to_dict(py, pairs)
    }

    // --- a continuation and a batch (`chat`) ---------------------------------------------

    /// `LlamaRunner.continuation`, through the family's library model.
    fn continuation<'py>(&mut self, py: Python<'py>, prompt: Vec<u32>, fed: Vec<u32>, segment: Vec<u32>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let core = &mut self.core;
        let a = py.detach(|| core.continuation(&prompt, &fed, &segment)).map_err(to_py)?;
        array_to_py(py, a)
    }

    /// `LlamaRunner.batch_last_logits`, through the family's library model.
    fn batch_last_logits<'py>(&mut self, py: Python<'py>, rows: Vec<Vec<u32>>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let core = &mut self.core;
        let a = py.detach(|| core.batch_last_logits(&rows)).map_err(to_py)?;
        array_to_py(py, a)
    }

    /// [N, L, vocab]: the rows through the module's padding-mask forward (qwen2 only; else
    /// NotImplementedError), every position.
    fn padded_batch_logits<'py>(&mut self, py: Python<'py>, rows: Vec<Vec<u32>>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let core = &mut self.core;
        let a = py.detach(|| core.padded_batch_logits(&rows)).map_err(to_py)?;
        array_to_py(py, a)
    }
}

#[pyclass(module = "portkit_native")]
struct GgufRunner {
    core: GgufCore,
}

#[pymethods]
impl GgufRunner {
    #[new]
    #[pyo3(signature = (path, device = "cpu", loader = "quantized_llama"))]
    fn new(py: Python<'_>, path: PathBuf, device: &str, loader: &str) -> PyResult<Self> {
        let device = parse_device(device).map_err(to_py)?;
        let core = py.detach(|| GgufCore::load_with(&path, loader, device)).map_err(to_py)?;
        Ok(Self { core })
    }

    #[getter]
    fn loader(&self) -> &'static str {
        self.core.loader()
    }

    fn last_logits<'py>(&mut self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let core = &mut self.core;
        let row = py.detach(|| core.last_logits(&ids)).map_err(to_py)?;
        Ok(PyArray1::from_vec(py, row))
    }

    #[pyo3(signature = (ids, prefill = 1))]
    fn teacher_forced_logits<'py>(&mut self, py: Python<'py>, ids: Vec<u32>, prefill: usize) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let core = &mut self.core;
        let a = py.detach(|| core.teacher_forced_logits(&ids, prefill)).map_err(to_py)?;
        array_to_py(py, a)
    }

    fn greedy(&mut self, py: Python<'_>, ids: Vec<u32>, n: usize) -> PyResult<Vec<u32>> {
        let core = &mut self.core;
        py.detach(|| core.greedy(&ids, n)).map_err(to_py)
    }

    /// (`greedy(ids[:prefill], n)`, `teacher_forced_logits(ids, prefill)`): the forwards they
    /// share run once.
    fn forced_and_greedy<'py>(&mut self, py: Python<'py>, ids: Vec<u32>, prefill: usize, n: usize) -> PyResult<(Vec<u32>, Bound<'py, PyArrayDyn<f32>>)> {
        let core = &mut self.core;
        let (tokens, rows) = py.detach(|| core.forced_and_greedy(&ids, prefill, n)).map_err(to_py)?;
        Ok((tokens, array_to_py(py, rows)?))
    }

    /// Per-layer values through the loader's copy of the forward (`gguf_capture_loaders()`).
    fn capture<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyDict>> {
        let pairs = py.detach(|| self.core.capture(&ids)).map_err(to_py)?;
        captured_to_dict(py, pairs)
    }

    // --- a continuation and a batch (`chat`) ---------------------------------------------

    /// `LlamaRunner.continuation`, through the loader's `ModelWeights::forward`.
    fn continuation<'py>(&mut self, py: Python<'py>, prompt: Vec<u32>, fed: Vec<u32>, segment: Vec<u32>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let core = &mut self.core;
        let a = py.detach(|| core.continuation(&prompt, &fed, &segment)).map_err(to_py)?;
        array_to_py(py, a)
    }

    /// `LlamaRunner.batch_last_logits`, through the loader's `ModelWeights::forward`.
    fn batch_last_logits<'py>(&mut self, py: Python<'py>, rows: Vec<Vec<u32>>) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let core = &mut self.core;
        let a = py.detach(|| core.batch_last_logits(&rows)).map_err(to_py)?;
        array_to_py(py, a)
    }
}

/// The `tokenizers` crate the built candle-core depends on, reading a tokenizer.json literally.
#[pyclass(module = "portkit_native", name = "Tokenizer", frozen)]
struct PyTokenizer {
    core: CrateTokenizer,
}

#[pymethods]
impl PyTokenizer {
    #[staticmethod]
    fn from_file(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let core = py.detach(|| CrateTokenizer::from_file(&path)).map_err(to_py)?;
        Ok(Self { core })
    }

    #[staticmethod]
    fn from_str(py: Python<'_>, json: String) -> PyResult<Self> {
        let core = py.detach(|| CrateTokenizer::from_json(&json)).map_err(to_py)?;
        Ok(Self { core })
    }

    #[pyo3(signature = (text, add_special_tokens = true))]
    fn encode(&self, py: Python<'_>, text: String, add_special_tokens: bool) -> PyResult<Vec<u32>> {
        py.detach(|| self.core.encode(&text, add_special_tokens)).map(|e| e.ids).map_err(to_py)
    }

    #[pyo3(signature = (text, add_special_tokens = true))]
    fn encode_pieces(&self, py: Python<'_>, text: String, add_special_tokens: bool) -> PyResult<(Vec<u32>, Vec<String>)> {
        py.detach(|| self.core.encode(&text, add_special_tokens)).map(|e| (e.ids, e.tokens)).map_err(to_py)
    }

    #[pyo3(signature = (ids, skip_special_tokens = false))]
    fn decode(&self, py: Python<'_>, ids: Vec<u32>, skip_special_tokens: bool) -> PyResult<String> {
        py.detach(|| self.core.decode(&ids, skip_special_tokens)).map_err(to_py)
    }

    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.core.token_to_id(token)
    }

    fn id_to_token(&self, id: u32) -> Option<String> {
        self.core.id_to_token(id)
    }

    #[pyo3(signature = (with_added_tokens = true))]
    fn vocab_size(&self, with_added_tokens: bool) -> usize {
        self.core.vocab_size(with_added_tokens)
    }
}

/// The chat-template environments `render_chat_template` knows, named after what users run.
#[pyfunction]
fn chat_environments() -> Vec<&'static str> {
    Renderer::ALL.iter().map(|r| r.key()).collect()
}

/// `request_json` (messages, add_generation_prompt, tools, bos/eos/unk tokens) rendered through
/// `template` the way `environment` renders it; `trim_blocks`/`lstrip_blocks` replace its own.
#[pyfunction]
#[pyo3(signature = (environment, template, request_json, trim_blocks = None, lstrip_blocks = None))]
fn render_chat_template(
    py: Python<'_>,
    environment: &str,
    template: String,
    request_json: String,
    trim_blocks: Option<bool>,
    lstrip_blocks: Option<bool>,
) -> PyResult<String> {
    let renderer = Renderer::from_key(environment).map_err(to_py)?;
    let switches = Switches { trim_blocks, lstrip_blocks };
    py.detach(|| chat_template::render(renderer, &template, &request_json, switches)).map_err(to_py)
}

/// The weights candle's sampler draws each step's token from (`crate::sampling`): `logits`
/// [steps, vocab] (f32), `contexts[k]` every token before step k (the prompt's included).
/// `sampling`: "new" (`LogitsProcessor::new(seed, temperature, top_p)`) or a `Sampling` variant
/// by name, with the parameters it takes.
#[pyfunction]
#[pyo3(signature = (logits, contexts, sampling, *, temperature=None, top_k=None, top_p=None, repeat_penalty=1.0, repeat_last_n=64, top_k_renormalised=None, seed=299792458))]
#[allow(clippy::too_many_arguments)]
fn sampling_weights<'py>(
    py: Python<'py>,
    logits: PyReadonlyArray2<'py, f32>,
    contexts: Vec<Vec<u32>>,
    sampling: &str,
    temperature: Option<f64>,
    top_k: Option<usize>,
    top_p: Option<f64>,
    repeat_penalty: f32,
    repeat_last_n: usize,
    top_k_renormalised: Option<usize>,
    seed: u64,
) -> PyResult<Bound<'py, PyArray2<f32>>> {
    let need = |name: &str, v: Option<f64>| v.ok_or_else(|| PyValueError::new_err(format!("Sampling::{sampling} needs `{name}`")));
    let k = || top_k.ok_or_else(|| PyValueError::new_err(format!("Sampling::{sampling} needs `top_k`")));
    let call = match sampling {
        "new" => Call::New { temperature, top_p },
        "ArgMax" => Call::FromSampling(Sampling::ArgMax),
        "All" => Call::FromSampling(Sampling::All { temperature: need("temperature", temperature)? }),
        "TopK" => Call::FromSampling(Sampling::TopK { k: k()?, temperature: need("temperature", temperature)? }),
        "TopP" => Call::FromSampling(Sampling::TopP { p: need("top_p", top_p)?, temperature: need("temperature", temperature)? }),
        "TopKThenTopP" => Call::FromSampling(Sampling::TopKThenTopP { k: k()?, p: need("top_p", top_p)?, temperature: need("temperature", temperature)? }),
        "GumbelSoftmax" => Call::FromSampling(Sampling::GumbelSoftmax { temperature: need("temperature", temperature)? }),
        other => return Err(PyValueError::new_err(format!("unknown sampling {other:?}: new, ArgMax, All, TopK, TopP, TopKThenTopP or GumbelSoftmax"))),
    };
    let rows = logits.as_array();
    let (steps, vocab) = rows.dim();
    if contexts.len() != steps {
        return Err(PyValueError::new_err(format!("{steps} rows of logits but {} contexts", contexts.len())));
    }
    let sampler = Sampler { call, repeat_penalty, repeat_last_n, top_k_renormalised };
    let flat: Vec<f32> = rows.iter().copied().collect();
    let out = py
        .detach(|| -> candle_core::Result<Vec<f32>> {
            let mut out = Vec::with_capacity(steps * vocab);
            for (k, context) in contexts.iter().enumerate() {
                out.extend(sampler.weights(&flat[k * vocab..(k + 1) * vocab], context, seed)?);
            }
            Ok(out)
        })
        .map_err(|e| CandleError::new_err(e.to_string()))?;
    let nd = numpy::ndarray::Array2::from_shape_vec((steps, vocab), out).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(nd.into_pyarray(py))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(candle_config_json, m)?)?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    m.add_function(wrap_pyfunction!(check_device, m)?)?;
    m.add_function(wrap_pyfunction!(capture_layers, m)?)?;
    m.add_function(wrap_pyfunction!(families, m)?)?;
    m.add_function(wrap_pyfunction!(sampling_weights, m)?)?;
    m.add_function(wrap_pyfunction!(capture_families, m)?)?;
    m.add_function(wrap_pyfunction!(encoder_capture_families, m)?)?;
    m.add_function(wrap_pyfunction!(gguf_loaders, m)?)?;
    m.add_function(wrap_pyfunction!(gguf_capture_loaders, m)?)?;
    m.add_function(wrap_pyfunction!(requested_tensors, m)?)?;
    m.add_function(wrap_pyfunction!(release_memory, m)?)?;
    m.add_function(wrap_pyfunction!(keep_weights, m)?)?;
    m.add_function(wrap_pyfunction!(kept_tensors, m)?)?;
    m.add_function(wrap_pyfunction!(cpu_threads, m)?)?;
    m.add_function(wrap_pyfunction!(chat_environments, m)?)?;
    m.add_function(wrap_pyfunction!(render_chat_template, m)?)?;
    m.add_class::<LlamaRunner>()?;
    m.add_class::<FamilyRunner>()?;
    m.add_class::<EncoderRunner>()?;
    m.add_function(wrap_pyfunction!(encoder_config_json, m)?)?;
    m.add_function(wrap_pyfunction!(encoder_families, m)?)?;
    m.add_class::<GgufRunner>()?;
    m.add_class::<PyTokenizer>()?;
    m.add("NativeError", py.get_type::<NativeError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("CandleError", py.get_type::<CandleError>())?;
    m.add("CandlePanic", py.get_type::<CandlePanic>())?;
    m.add("DeviceUnavailableError", py.get_type::<DeviceUnavailableError>())?;
    m.add("TokenizerError", py.get_type::<TokenizerError>())?;
    m.add("ChatTemplateError", py.get_type::<ChatTemplateError>())?;
    Ok(())
}
