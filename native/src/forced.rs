//! Teacher forcing and greedy decoding in one pass, for the runners whose KV cache can be copied
//! (`chat::Warm`): the GGUF loaders and `LlamaRunner`. verify's counterfactual runs feed the
//! reference's tokens and also want candle's own greedy tokens; without this they run every
//! forward twice.

use crate::array::Array;
use crate::chat::{LlamaTurn, Warm};
use crate::failure::{guarded, Failure, Outcome};
use crate::gguf::GgufRunner;
use crate::llama::{argmax, LlamaRunner};

/// `(greedy(prompt, n), teacher_forced_logits(prompt + fed, prompt.len()))` with the forwards
/// they share run once: up to the first step where candle's own pick differs from the fed token
/// both run the same forwards on the same inputs, so the greedy tokens are the teacher-forced
/// rows' argmax there; at that step the model (its KV cache) is copied before the fed token goes
/// in, and once teacher forcing is done the greedy tokens continue from the copy with the very
/// forwards `greedy` runs. `w.step(prompt, 0)` must start from an empty cache. The greedy tokens
/// are None where they fork and the model cannot be copied (the caller then runs `greedy`).
fn forced_and_greedy_rows<W: Warm>(w: &mut W, prompt: &[u32], fed: &[u32], n: usize) -> Outcome<(Option<Vec<u32>>, Array)> {
    let mut data = w.step(prompt, 0)?;
    let vocab = data.len();
    let mut greedy: Vec<u32> = Vec::with_capacity(n);
    // (the model before the fed token that differs from candle's pick) or no copy
    let mut fork: Option<Option<W::Snapshot>> = None;
    for j in 0..=fed.len() {
        if fork.is_none() && greedy.len() < n {
            let pick = argmax(&data[j * vocab..(j + 1) * vocab]);
            greedy.push(pick);
            if j < fed.len() && pick != fed[j] && greedy.len() < n {
                fork = Some(w.snapshot());
            }
        }
        if j < fed.len() {
            data.extend(w.step(&[fed[j]], prompt.len() + j)?);
        }
    }
    let rows = Array { shape: vec![fed.len() + 1, vocab], data };
    match fork {
        Some(None) => return Ok((None, rows)),
        Some(Some(copy)) => w.restore(&copy),
        None => {}
    }
    // candle's own tokens on: from the fork's copy, or past the last fed token
    while greedy.len() < n {
        let last = greedy[greedy.len() - 1];
        let row = w.step(&[last], prompt.len() + greedy.len() - 1)?;
        greedy.push(argmax(&row));
    }
    Ok((Some(greedy), rows))
}

fn split_prefill(ids: &[u32], prefill: usize) -> Outcome<(&[u32], &[u32])> {
    if prefill == 0 || prefill > ids.len() {
        return Err(Failure::Invalid(format!("prefill must be in 1..={}, got {prefill}", ids.len())));
    }
    Ok(ids.split_at(prefill))
}

impl GgufRunner {
    /// `(greedy(&ids[..prefill], n), teacher_forced_logits(ids, prefill))`, bit for bit, with the
    /// forwards they share run once (`forced_and_greedy_rows`); quantized_qwen2, whose model
    /// cannot be copied, runs `greedy` after teacher forcing where the tokens fork
    /// (tests/native/test_forced_and_greedy.py).
    pub fn forced_and_greedy(&mut self, ids: &[u32], prefill: usize, n: usize) -> Outcome<(Vec<u32>, Array)> {
        let (prompt, fed) = split_prefill(ids, prefill)?;
        // index_pos 0 starts every loader from an empty cache (`GgufRunner::forward_row`)
        match guarded(|| forced_and_greedy_rows(self, prompt, fed, n))? {
            (Some(greedy), rows) => Ok((greedy, rows)),
            (None, rows) => Ok((self.greedy(prompt, n)?, rows)),
        }
    }
}

impl LlamaRunner {
    /// `GgufRunner::forced_and_greedy` through `Llama::forward` on a fresh `Cache` (a copy of
    /// it is a copy of the model's state: the library's cache grows by `Tensor::cat`,
    /// llama.rs:300-301, so a copy is never written into).
    pub fn forced_and_greedy(&self, ids: &[u32], prefill: usize, n: usize) -> Outcome<(Vec<u32>, Array)> {
        let (prompt, fed) = split_prefill(ids, prefill)?;
        let cache = self.new_cache()?;
        let (greedy, rows) = guarded(|| forced_and_greedy_rows(&mut LlamaTurn { runner: self, cache }, prompt, fed, n))?;
        Ok((greedy.expect("a llama::Cache can always be copied"), rows))
    }
}
