//! The distribution a candle program draws each next token from, computed without drawing on
//! it: candle-transformers' own `apply_repeat_penalty` over the last `repeat_last_n` tokens (as
//! candle-examples call it), then its `LogitsProcessor` (`generation_copy`: the library's text,
//! recording the weights it hands `WeightedIndex`).

use crate::generation_copy::{LogitsProcessor, Sampling};
use candle_core::{Device, Result, Tensor};

/// How the program builds its `LogitsProcessor`.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `LogitsProcessor::new(seed, temperature, top_p)`
    New { temperature: Option<f64>, top_p: Option<f64> },
    /// `LogitsProcessor::from_sampling(seed, sampling)`
    FromSampling(Sampling),
}

/// What a candle generation loop does to the logits of one step.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampler {
    pub call: Call,
    /// `apply_repeat_penalty(&logits, repeat_penalty, &tokens[start_at..])`; 1.0: not called
    pub repeat_penalty: f32,
    pub repeat_last_n: usize,
    /// `sample_f` with the closure `keep_top_k_renormalised(prs, k)`; None: `sample`
    pub top_k_renormalised: Option<usize>,
}

impl Sampler {
    fn processor(&self, seed: u64) -> LogitsProcessor {
        match &self.call {
            Call::New { temperature, top_p } => LogitsProcessor::new(seed, *temperature, *top_p),
            Call::FromSampling(s) => LogitsProcessor::from_sampling(seed, s.clone()),
        }
    }

    /// The unnormalised weights the next token is drawn from (one per vocabulary entry), after
    /// `logits` with `context` (every token so far, the prompt's included) fed before them.
    pub fn weights(&self, logits: &[f32], context: &[u32], seed: u64) -> Result<Vec<f32>> {
        let mut t = Tensor::from_slice(logits, logits.len(), &Device::Cpu)?;
        if self.repeat_penalty != 1.0 {
            let start_at = context.len().saturating_sub(self.repeat_last_n);
            t = candle_transformers::utils::apply_repeat_penalty(&t, self.repeat_penalty, &context[start_at..])?;
        }
        let mut lp = self.processor(seed);
        match self.top_k_renormalised {
            Some(k) => lp.sample_f(&t, |prs| keep_top_k_renormalised(prs, k))?,
            None => lp.sample(&t)?,
        };
        Ok(lp.weights)
    }
}

/// The `sample_f` closure portkit advises where generation_config sets top-k with top-p:
/// transformers' `TopKLogitsWarper` (every probability below the k-th largest dropped; ties with
/// it kept) and the renormalisation its softmax does before `TopPLogitsWarper`, which
/// `Sampling::TopKThenTopP` leaves out.
pub fn keep_top_k_renormalised(prs: &mut [f32], k: usize) {
    if k == 0 || k >= prs.len() {
        return;
    }
    let mut sorted = prs.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let kth = sorted[k - 1];
    for p in prs.iter_mut() {
        if *p < kth {
            *p = 0.0;
        }
    }
    let sum: f32 = prs.iter().sum();
    for p in prs.iter_mut() {
        *p /= sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(w: &[f32]) -> usize {
        w.iter().filter(|&&x| x > 0.0).count()
    }

    #[test]
    fn top_k_then_top_p_keeps_all_k_on_flat_logits() {
        // nearly flat: distinct, so that top-k has no ties at the k-th
        let flat = (0..100).map(|i| -(i as f32) * 1e-3).collect::<Vec<_>>();
        let s = Sampler {
            call: Call::FromSampling(Sampling::TopKThenTopP { k: 20, p: 0.8, temperature: 1.0 }),
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            top_k_renormalised: None,
        };
        assert_eq!(kept(&s.weights(&flat, &[], 1).unwrap()), 20);
        let advised = Sampler {
            call: Call::FromSampling(Sampling::TopP { p: 0.8, temperature: 1.0 }),
            top_k_renormalised: Some(20),
            ..s
        };
        assert_eq!(kept(&advised.weights(&flat, &[], 1).unwrap()), 16);
    }

    /// The copy draws exactly the library's tokens (same seed, same rng stream), and every token
    /// it draws has a weight: the recorded weights are what it drew from.
    #[test]
    fn the_copy_draws_the_librarys_tokens() {
        use candle_transformers::generation as lib;
        let logits: Vec<f32> = (0..300).map(|i| ((i * 7919) % 101) as f32 / 17.0).collect();
        let t = Tensor::from_slice(&logits, logits.len(), &Device::Cpu).unwrap();
        let pairs = [
            (Sampling::ArgMax, lib::Sampling::ArgMax),
            (Sampling::All { temperature: 0.7 }, lib::Sampling::All { temperature: 0.7 }),
            (Sampling::TopK { k: 12, temperature: 0.9 }, lib::Sampling::TopK { k: 12, temperature: 0.9 }),
            (Sampling::TopP { p: 0.6, temperature: 1.3 }, lib::Sampling::TopP { p: 0.6, temperature: 1.3 }),
            (Sampling::TopKThenTopP { k: 40, p: 0.5, temperature: 1.0 }, lib::Sampling::TopKThenTopP { k: 40, p: 0.5, temperature: 1.0 }),
        ];
        for (ours, theirs) in pairs {
            let mut copy = LogitsProcessor::from_sampling(7, ours.clone());
            let mut library = lib::LogitsProcessor::from_sampling(7, theirs);
            for _ in 0..50 {
                let token = copy.sample(&t).unwrap();
                assert_eq!(token, library.sample(&t).unwrap(), "{ours:?}");
                assert!(copy.weights[token as usize] > 0.0, "{ours:?}: drew a token of weight 0");
                assert_eq!(copy.weights.len(), logits.len());
            }
        }
    }

    #[test]
    fn repeat_penalty_reads_only_the_window() {
        let logits = vec![1f32, 1.0, 1.0, 1.0];
        let s = Sampler {
            call: Call::New { temperature: Some(1.0), top_p: None },
            repeat_penalty: 2.0,
            repeat_last_n: 1,
            top_k_renormalised: None,
        };
        let w = s.weights(&logits, &[0, 1], 1).unwrap();
        assert!(w[1] < w[0] && w[0] == w[2]);
    }
}
