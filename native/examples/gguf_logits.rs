//! The baseline quantized candle program for the GGUF workflow: load a GGUF with
//! `candle_transformers::models::quantized_llama`, teacher-force the reference's tokens (prefill
//! the prompt, then feed each reference token through the KV cache, keeping every step's logits),
//! then generate greedily from the prompt. `bench/verify_bench.py --gguf` times it against
//! `portkit verify --gguf`.
//!
//! Build: `cd native && cargo build --release --example gguf_logits --no-default-features`
//! Run:   `gguf_logits <cpu|metal> <file.gguf> <ids,comma,separated> <ref,tokens> <n> <rows.f32>`
//!
//! Writes the `n` teacher-forced rows (the prefill's last position, then one per fed reference
//! token) as little-endian f32 to `rows.f32`, and `{"vocab": V, "greedy": [...]}` on stdout.

use candle_core::quantized::gguf_file;
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use std::error::Error;
use std::io::Write;

fn ids(arg: &str) -> Result<Vec<u32>, Box<dyn Error>> {
    Ok(arg.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse()).collect::<Result<_, _>>()?)
}

fn row(model: &mut ModelWeights, tokens: &[u32], pos: usize, dev: &Device) -> Result<Vec<f32>, Box<dyn Error>> {
    let x = Tensor::new(tokens, dev)?.unsqueeze(0)?;
    Ok(model.forward(&x, pos)?.squeeze(0)?.to_vec1::<f32>()?)
}

fn argmax(v: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 7 {
        return Err("usage: gguf_logits <cpu|metal> <file.gguf> <ids,comma,separated> <ref,tokens> <n> <rows.f32>".into());
    }
    let dev = match args[1].as_str() {
        "metal" => Device::new_metal(0)?,
        _ => Device::Cpu,
    };
    let prompt = ids(&args[3])?;
    let reference = ids(&args[4])?;
    let n: usize = args[5].parse()?;
    let mut file = std::fs::File::open(&args[2])?;
    let content = gguf_file::Content::read(&mut file)?;
    let mut model = ModelWeights::from_gguf(content, &mut file, &dev)?;

    // teacher forcing: `index_pos == 0` starts a fresh KV cache (quantized_llama.rs)
    let mut out = std::io::BufWriter::new(std::fs::File::create(&args[6])?);
    let first = row(&mut model, &prompt, 0, &dev)?;
    let vocab = first.len();
    let mut put = |r: &[f32]| -> std::io::Result<()> { r.iter().try_for_each(|x| out.write_all(&x.to_le_bytes())) };
    put(&first)?;
    for (k, &tok) in reference.iter().take(n.saturating_sub(1)).enumerate() {
        put(&row(&mut model, &[tok], prompt.len() + k, &dev)?)?;
    }
    drop(put);
    out.flush()?;

    // free greedy generation from the prompt
    let mut greedy: Vec<u32> = Vec::with_capacity(n);
    if n > 0 {
        greedy.push(argmax(&row(&mut model, &prompt, 0, &dev)?));
        for pos in prompt.len()..prompt.len() + n - 1 {
            let last = greedy[greedy.len() - 1];
            greedy.push(argmax(&row(&mut model, &[last], pos, &dev)?));
        }
    }
    println!("{}", serde_json::json!({ "vocab": vocab, "greedy": greedy }));
    Ok(())
}
