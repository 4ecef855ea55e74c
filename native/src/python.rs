//! The Python surface (`portkit_native._native`). All conversion between candle's failures and
//! Python exceptions lives here; the compute releases the GIL.

use crate::config;
use crate::device::{compiled_devices, parse_device, parse_dtype};
use crate::failure::Failure;
use crate::gguf::GgufRunner as GgufCore;
use crate::llama::{capture_layers as capture_core, Array, LlamaRunner as LlamaCore};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArray1, PyArrayDyn};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyFileNotFoundError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

create_exception!(portkit_native, NativeError, PyException, "Base class of every error portkit_native raises for candle.");
create_exception!(portkit_native, ConfigError, NativeError, "candle's serde refused the config JSON; the message is serde_json's, unchanged.");
create_exception!(portkit_native, CandleError, NativeError, "candle returned an Err; the message is candle's, unchanged.");
create_exception!(portkit_native, CandlePanic, NativeError, "candle panicked; the panic was caught and the message keeps candle's location and text.");
create_exception!(portkit_native, DeviceUnavailableError, NativeError, "The device is not built into this wheel (or not present); the message says how to get it.");

fn to_py(f: Failure) -> PyErr {
    match f {
        Failure::Config(m) => ConfigError::new_err(m),
        Failure::Candle(m) => CandleError::new_err(m),
        Failure::Panic(m) => CandlePanic::new_err(m),
        Failure::DeviceUnavailable(m) => DeviceUnavailableError::new_err(m),
        Failure::Invalid(m) => PyValueError::new_err(m),
        Failure::NotFound(m) => PyFileNotFoundError::new_err(m),
    }
}

fn array_to_py<'py>(py: Python<'py>, a: Array) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let nd = ArrayD::from_shape_vec(IxDyn(&a.shape), a.data).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(nd.into_pyarray(py))
}

/// candle's effective config as a JSON string (the Python wrapper parses it into a dict).
#[pyfunction]
fn candle_config_json(config_json: &str) -> PyResult<String> {
    let cfg = config::parse(config_json, false).map_err(to_py)?;
    Ok(config::effective(&cfg).to_string())
}

#[pyfunction]
fn build_info(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("candle_version", "0.11.0")?;
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
#[pyo3(signature = (weight_files, config_json, ids, dtype = "f32", cache_dtype = None, device = "cpu"))]
fn capture_layers<'py>(
    py: Python<'py>,
    weight_files: Vec<PathBuf>,
    config_json: String,
    ids: Vec<u32>,
    dtype: &str,
    cache_dtype: Option<&str>,
    device: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let dtype = parse_dtype(dtype).map_err(to_py)?;
    let cache_dtype = cache_dtype.map(parse_dtype).transpose().map_err(to_py)?;
    let device = parse_device(device).map_err(to_py)?;
    let pairs = py
        .detach(|| capture_core(&weight_files, &config_json, &ids, dtype, cache_dtype, &device))
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

    fn capture<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyDict>> {
        let pairs = py.detach(|| self.core.capture(&ids)).map_err(to_py)?;
        captured_to_dict(py, pairs)
    }
}

#[pyclass(module = "portkit_native")]
struct GgufRunner {
    core: GgufCore,
}

#[pymethods]
impl GgufRunner {
    #[new]
    #[pyo3(signature = (path, device = "cpu"))]
    fn new(py: Python<'_>, path: PathBuf, device: &str) -> PyResult<Self> {
        let device = parse_device(device).map_err(to_py)?;
        let core = py.detach(|| GgufCore::load(&path, device)).map_err(to_py)?;
        Ok(Self { core })
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
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_function(wrap_pyfunction!(candle_config_json, m)?)?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    m.add_function(wrap_pyfunction!(check_device, m)?)?;
    m.add_function(wrap_pyfunction!(capture_layers, m)?)?;
    m.add_class::<LlamaRunner>()?;
    m.add_class::<GgufRunner>()?;
    m.add("NativeError", py.get_type::<NativeError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("CandleError", py.get_type::<CandleError>())?;
    m.add("CandlePanic", py.get_type::<CandlePanic>())?;
    m.add("DeviceUnavailableError", py.get_type::<DeviceUnavailableError>())?;
    Ok(())
}
