//! The baseline candle program (docs/measurements.md): load a Llama checkpoint with
//! `candle_transformers::models::llama`, print the last-position logits and greedy tokens as
//! JSON on stdout. `bench/verify_bench.py` times it against `portkit verify`.
//!
//! Build: `cd native && cargo build --release --example logits_json --no-default-features`
//! Run:   `logits_json <cpu|metal> <model_dir> <ids,comma,separated> <n_greedy>`

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::llama::{Cache, Llama, LlamaConfig};
use std::error::Error;
use std::path::Path;

fn weight_files(dir: &Path) -> Result<Vec<std::path::PathBuf>, Box<dyn Error>> {
    let index = dir.join("model.safetensors.index.json");
    if index.is_file() {
        let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(&index)?)?;
        let map = doc["weight_map"].as_object().ok_or("index without weight_map")?;
        let mut files: Vec<String> = map.values().filter_map(|v| v.as_str().map(String::from)).collect();
        files.sort();
        files.dedup();
        return Ok(files.into_iter().map(|f| dir.join(f)).collect());
    }
    Ok(vec![dir.join("model.safetensors")])
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 5 {
        return Err("usage: logits_json <cpu|metal> <model_dir> <ids,comma,separated> <n_greedy>".into());
    }
    let dev = match args[1].as_str() {
        "metal" => Device::new_metal(0)?,
        _ => Device::Cpu,
    };
    let dir = Path::new(&args[2]);
    let ids: Vec<u32> = args[3].split(',').map(|s| s.trim().parse()).collect::<Result<_, _>>()?;
    let n: usize = args[4].parse()?;

    let cfg: LlamaConfig = serde_json::from_slice(&std::fs::read(dir.join("config.json"))?)?;
    let cfg = cfg.into_config(false);
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&weight_files(dir)?, DType::F32, &dev)? };
    let model = Llama::load(vb, &cfg)?;
    let mut cache = Cache::new(true, DType::F32, &cfg, &dev)?;
    let input = Tensor::new(ids.as_slice(), &dev)?.unsqueeze(0)?;
    let logits = model.forward(&input, 0, &mut cache)?.squeeze(0)?;

    let mut greedy: Vec<u32> = Vec::with_capacity(n);
    if n > 0 {
        greedy.push(logits.argmax(0)?.to_scalar::<u32>()?);
        for pos in ids.len()..ids.len() + n - 1 {
            let x = Tensor::new(&[greedy[greedy.len() - 1]], &dev)?.unsqueeze(0)?;
            let l = model.forward(&x, pos, &mut cache)?.squeeze(0)?;
            greedy.push(l.argmax(0)?.to_scalar::<u32>()?);
        }
    }
    let logits: Vec<f32> = logits.to_vec1()?;
    println!("{}", serde_json::json!({ "logits": logits, "greedy": greedy }));
    Ok(())
}
