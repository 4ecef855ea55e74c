//! candle's quantized matmul as this build compiles it (x86-64-v3: the AVX2 `vec_dot`s of
//! candle-core-0.11.0/src/quantized/avx.rs; elsewhere the scalar or NEON ones) computes the exact
//! dot product of the dequantized weights with the 8-bit-rounded activations, to f32 rounding:
//! the build flags change the order of the sums, never the math. Negative control: the same
//! product without rounding the activations is off by the 8-bit step, far over the bound.

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

const N: usize = 256;
const K: usize = 576; // SmolLM2-135M's hidden size: 18 blocks of 32

fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// (max |candle - exact with rounded activations|, max |candle - exact without|, max |exact|)
fn errors(dtype: GgmlDType, act: GgmlDType) -> (f64, f64, f64) {
    let dev = Device::Cpu;
    let w = Tensor::from_vec(values(N * K, 1, 1.0), (N, K), &dev).unwrap();
    let mut x = values(K, 2, 3.0);
    x[7] = 40.0; // an outlier, as real activations have
    let xt = Tensor::from_vec(x.clone(), (1, K), &dev).unwrap();
    let qw = QTensor::quantize(&w, dtype).unwrap();
    let wd = qw.dequantize(&dev).unwrap().to_vec2::<f32>().unwrap();
    let xd = QTensor::quantize(&xt, act).unwrap().dequantize(&dev).unwrap().to_vec2::<f32>().unwrap();
    let y = QMatMul::from_qtensor(qw).unwrap().forward(&xt).unwrap().to_vec2::<f32>().unwrap();
    let (mut rounded, mut plain, mut big) = (0f64, 0f64, 0f64);
    for i in 0..N {
        let exact: f64 = (0..K).map(|j| wd[i][j] as f64 * xd[0][j] as f64).sum();
        let unrounded: f64 = (0..K).map(|j| wd[i][j] as f64 * x[j] as f64).sum();
        rounded = rounded.max((y[0][i] as f64 - exact).abs());
        plain = plain.max((y[0][i] as f64 - unrounded).abs());
        big = big.max(exact.abs());
    }
    (rounded, plain, big)
}

#[test]
fn q8_0_is_the_exact_integer_dot_product() {
    let (rounded, plain, big) = errors(GgmlDType::Q8_0, GgmlDType::Q8_0);
    assert!(rounded <= 1e-6 * big * K as f64, "Q8_0: {rounded} off the exact product (|y| up to {big})");
    assert!(plain > 100.0 * rounded, "negative control: unrounded activations only {plain} off");
}

#[test]
fn q4_0_is_the_exact_integer_dot_product() {
    let (rounded, plain, big) = errors(GgmlDType::Q4_0, GgmlDType::Q8_0);
    assert!(rounded <= 1e-6 * big * K as f64, "Q4_0: {rounded} off the exact product (|y| up to {big})");
    assert!(plain > 100.0 * rounded, "negative control: unrounded activations only {plain} off");
}

#[test]
fn this_build_has_the_kernels_it_was_meant_to() {
    #[cfg(target_arch = "x86_64")]
    assert!(cfg!(target_feature = "avx2") && cfg!(target_feature = "fma"), "built without the repository's .cargo/config.toml");
}
