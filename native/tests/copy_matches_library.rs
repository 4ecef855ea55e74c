//! The per-layer copy must reproduce the library's last-position logits bit for bit, and the
//! runner must surface candle's panics and errors as values. Weights are random, written here.

use candle_core::{DType, Device, Tensor};
use portkit_native::failure::Failure;
use portkit_native::llama::LlamaRunner;
use std::collections::HashMap;
use std::path::PathBuf;

const HIDDEN: usize = 64;
const INTER: usize = 96;
const VOCAB: usize = 128;
const LAYERS: usize = 3;
const HEADS: usize = 4;
const KV_HEADS: usize = 2;

fn config(layers: usize, tie: bool) -> String {
    format!(
        r#"{{"hidden_size":{HIDDEN},"intermediate_size":{INTER},"vocab_size":{VOCAB},"num_hidden_layers":{layers},
           "num_attention_heads":{HEADS},"num_key_value_heads":{KV_HEADS},"rms_norm_eps":1e-5,
           "rope_theta":100000.0,"max_position_embeddings":64,"tie_word_embeddings":{tie}}}"#
    )
}

fn write_weights(dir: &std::path::Path, tie: bool) -> PathBuf {
    let dev = Device::Cpu;
    let head_dim = HIDDEN / HEADS;
    let mut t: HashMap<String, Tensor> = HashMap::new();
    let mut put = |name: String, shape: &[usize], std: f64| {
        let x = Tensor::randn(0f32, std as f32, shape, &dev).unwrap();
        t.insert(name, x);
    };
    put("model.embed_tokens.weight".into(), &[VOCAB, HIDDEN], 1.0);
    if !tie {
        put("lm_head.weight".into(), &[VOCAB, HIDDEN], 0.2);
    }
    put("model.norm.weight".into(), &[HIDDEN], 0.1);
    for i in 0..LAYERS {
        let p = format!("model.layers.{i}");
        put(format!("{p}.self_attn.q_proj.weight"), &[HEADS * head_dim, HIDDEN], 0.2);
        put(format!("{p}.self_attn.k_proj.weight"), &[KV_HEADS * head_dim, HIDDEN], 0.2);
        put(format!("{p}.self_attn.v_proj.weight"), &[KV_HEADS * head_dim, HIDDEN], 0.2);
        put(format!("{p}.self_attn.o_proj.weight"), &[HIDDEN, HEADS * head_dim], 0.2);
        put(format!("{p}.mlp.gate_proj.weight"), &[INTER, HIDDEN], 0.2);
        put(format!("{p}.mlp.up_proj.weight"), &[INTER, HIDDEN], 0.2);
        put(format!("{p}.mlp.down_proj.weight"), &[HIDDEN, INTER], 0.2);
        put(format!("{p}.input_layernorm.weight"), &[HIDDEN], 0.1);
        put(format!("{p}.post_attention_layernorm.weight"), &[HIDDEN], 0.1);
    }
    // norms around 1, like trained checkpoints
    for (k, v) in t.iter_mut() {
        if k.ends_with("norm.weight") {
            *v = (v.clone() + 1.0).unwrap();
        }
    }
    let path = dir.join(format!("model-{tie}.safetensors"));
    candle_core::safetensors::save(&t, &path).unwrap();
    path
}

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("portkit-native-test-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

const IDS: [u32; 10] = [1, 17, 42, 99, 5, 63, 120, 7, 88, 31];

#[test]
fn copy_logits_equal_library_bit_for_bit() {
    let dir = tmpdir("copy");
    for tie in [true, false] {
        let w = write_weights(&dir, tie);
        let runner = LlamaRunner::load(vec![w], &config(LAYERS, tie), DType::F32, None, Device::Cpu, false).unwrap();
        let lib = runner.last_logits(&IDS).unwrap();
        let cap = runner.capture(&IDS).unwrap();
        let names: Vec<&str> = cap.iter().map(|(n, _)| n.as_str()).filter(|n| n.matches('.').count() < 2).collect();
        assert_eq!(names, ["embeddings", "layer.0", "layer.1", "layer.2", "norm", "logits"]);
        // each block's sub-layers, in computation order, before the block's output
        let subs = ["input_layernorm", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn", "post_attention_layernorm", "mlp"];
        let block1: Vec<&str> = cap.iter().map(|(n, _)| n.as_str()).skip_while(|n| *n != "layer.0").skip(1).take(subs.len() + 1).collect();
        let want: Vec<String> = subs.iter().map(|s| format!("layer.1.{s}")).chain(["layer.1".to_string()]).collect();
        assert_eq!(block1, want);
        let kv = cap.iter().find(|(n, _)| n == "layer.2.self_attn.k_proj").unwrap();
        assert_eq!(kv.1.shape, vec![IDS.len(), KV_HEADS * HIDDEN / HEADS]);
        let copy = &cap.last().unwrap().1.data;
        let max_diff = lib.iter().zip(copy).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert_eq!(max_diff, 0.0, "tie={tie}: copy vs library max |diff| = {max_diff:e}");
        let spread = lib.iter().cloned().fold(f32::MIN, f32::max) - lib.iter().cloned().fold(f32::MAX, f32::min);
        assert!(spread > 1.0, "logits too flat to prove anything: spread {spread}");
    }
}

#[test]
fn teacher_forcing_matches_full_forward_and_greedy_follows_argmax() {
    let dir = tmpdir("tf");
    let w = write_weights(&dir, true);
    let runner = LlamaRunner::load(vec![w], &config(LAYERS, true), DType::F32, None, Device::Cpu, false).unwrap();
    let tf = runner.teacher_forced_logits(&IDS, 4).unwrap();
    assert_eq!(tf.shape, vec![IDS.len() - 4 + 1, VOCAB]);
    // The last row (KV cache, one token at a time) equals one full forward up to f32 rounding.
    let full = runner.last_logits(&IDS).unwrap();
    let last_row = &tf.data[(tf.shape[0] - 1) * VOCAB..];
    let d = full.iter().zip(last_row).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(d < 1e-4, "kv-cache path vs full forward: {d:e}");
    let greedy = runner.greedy(&IDS, 3).unwrap();
    assert_eq!(greedy.len(), 3);
    assert_eq!(greedy[0], portkit_native::llama::argmax(&full));
}

#[test]
fn missing_layer_panic_is_caught_with_candles_message() {
    let dir = tmpdir("panic");
    let w = write_weights(&dir, true);
    let err = LlamaRunner::load(vec![w], &config(LAYERS + 1, true), DType::F32, None, Device::Cpu, false).err().unwrap();
    match err {
        Failure::Panic(m) => {
            assert!(m.contains("cannot find tensor model.layers.3.self_attn.q_proj.weight"), "{m}");
            assert!(m.contains("llama.rs:524"), "{m}");
        }
        other => panic!("expected a caught panic, got {other:?}"),
    }
}

#[test]
fn untied_without_lm_head_is_a_candle_error() {
    let dir = tmpdir("lmhead");
    let w = write_weights(&dir, true);
    let err = LlamaRunner::load(vec![w], &config(LAYERS, false), DType::F32, None, Device::Cpu, false).err().unwrap();
    match err {
        Failure::Candle(m) => assert!(m.contains("lm_head.weight"), "{m}"),
        other => panic!("expected a candle error, got {other:?}"),
    }
}

#[test]
fn flash_attn_without_feature_panics_at_first_forward() {
    let dir = tmpdir("flash");
    let w = write_weights(&dir, true);
    let runner = LlamaRunner::load(vec![w], &config(LAYERS, true), DType::F32, None, Device::Cpu, true).unwrap();
    match runner.last_logits(&IDS).err().unwrap() {
        Failure::Panic(m) => assert!(m.contains("compile with '--features flash-attn'"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn cache_dtype_mismatch_is_candles_rope_error() {
    let dir = tmpdir("cachedt");
    let w = write_weights(&dir, true);
    let runner =
        LlamaRunner::load(vec![w], &config(LAYERS, true), DType::F16, Some(DType::F32), Device::Cpu, false).unwrap();
    match runner.last_logits(&IDS).err().unwrap() {
        // The CPU kernel words it "unsupported dtype for rope F16 F32 F32"; Metal says
        // "dtype mismatch in rope BF16 F32 F32" (measured on Metal). Both name the three dtypes.
        Failure::Candle(m) => assert!(m.contains("for rope F16 F32 F32") || m.contains("dtype mismatch in rope"), "{m}"),
        other => panic!("{other:?}"),
    }
}
