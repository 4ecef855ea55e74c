//! Device and dtype names as portkit's CLI spells them (`cpu`, `cuda[:N]`, `metal`; `f32`, `bf16`, `f16`).

use crate::failure::{Failure, Outcome};
use candle_core::{DType, Device};

pub fn parse_dtype(name: &str) -> Outcome<DType> {
    match name {
        "f32" => Ok(DType::F32),
        "bf16" => Ok(DType::BF16),
        "f16" => Ok(DType::F16),
        other => Err(Failure::Invalid(format!("unknown dtype `{other}`: expected f32, bf16 or f16"))),
    }
}

/// Devices compiled into this build, for error messages and `build_info()`.
pub fn compiled_devices() -> Vec<&'static str> {
    let mut devices = vec!["cpu"];
    if cfg!(feature = "cuda") {
        devices.push("cuda");
    }
    if cfg!(target_os = "macos") {
        devices.push("metal");
    }
    devices
}

pub fn parse_device(name: &str) -> Outcome<Device> {
    let (kind, ordinal) = match name.split_once(':') {
        Some((k, n)) => {
            let n: usize = n
                .parse()
                .map_err(|_| Failure::Invalid(format!("bad device ordinal in `{name}`")))?;
            (k, n)
        }
        None => (name, 0),
    };
    match kind {
        "cpu" => Ok(Device::Cpu),
        "cuda" => cuda(ordinal),
        "metal" => metal(ordinal),
        other => Err(Failure::Invalid(format!("unknown device `{other}`: expected cpu, cuda or metal"))),
    }
}

#[cfg(feature = "cuda")]
fn cuda(ordinal: usize) -> Outcome<Device> {
    Device::new_cuda(ordinal).map_err(|e| Failure::DeviceUnavailable(format!("cuda:{ordinal}: {e}")))
}

#[cfg(not(feature = "cuda"))]
fn cuda(_: usize) -> Outcome<Device> {
    Err(Failure::DeviceUnavailable(
        "this portkit_native build has no CUDA support; rebuild it with \
         `maturin build --release -m native/Cargo.toml --features cuda` (needs the CUDA toolkit)"
            .into(),
    ))
}

#[cfg(target_os = "macos")]
fn metal(ordinal: usize) -> Outcome<Device> {
    Device::new_metal(ordinal).map_err(|e| Failure::DeviceUnavailable(format!("metal:{ordinal}: {e}")))
}

#[cfg(not(target_os = "macos"))]
fn metal(_: usize) -> Outcome<Device> {
    Err(Failure::DeviceUnavailable(
        "Metal is only built into portkit_native on macOS (it is enabled by target there); \
         on this machine use --device cpu, or cuda with a `--features cuda` build"
            .into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(matches!(parse_device("cpu"), Ok(Device::Cpu)));
        assert!(matches!(parse_device("tpu"), Err(Failure::Invalid(_))));
        assert!(matches!(parse_dtype("bf16"), Ok(DType::BF16)));
        assert!(matches!(parse_dtype("f64"), Err(Failure::Invalid(_))));
    }

    #[cfg(not(target_os = "macos"))]
    #[test]
    fn metal_off_macos_says_how() {
        match parse_device("metal") {
            Err(Failure::DeviceUnavailable(m)) => assert!(m.contains("macOS"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
