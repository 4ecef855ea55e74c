//! candle's own reading of a config.json: `LlamaConfig` serde + `into_config(false)`,
//! reported as the effective values. This is the oracle portkit's Python mirror is tested against.

use crate::failure::{Failure, Outcome};
use candle_transformers::models::llama::{Config, LlamaConfig, LlamaEosToks, Llama3RopeType};
use serde_json::{json, Value};

pub fn parse(config_json: &str, use_flash_attn: bool) -> Outcome<Config> {
    let cfg: LlamaConfig = serde_json::from_str(config_json).map_err(|e| Failure::Config(e.to_string()))?;
    Ok(cfg.into_config(use_flash_attn))
}

/// The effective values as JSON (`head_dim` as candle derives it: hidden_size / num_attention_heads).
pub fn effective(cfg: &Config) -> Value {
    let eos = match &cfg.eos_token_id {
        None => Value::Null,
        Some(LlamaEosToks::Single(id)) => json!(id),
        Some(LlamaEosToks::Multiple(ids)) => json!(ids),
    };
    let rope_scaling = match &cfg.rope_scaling {
        None => Value::Null,
        Some(s) => json!({
            "factor": s.factor,
            "low_freq_factor": s.low_freq_factor,
            "high_freq_factor": s.high_freq_factor,
            "original_max_position_embeddings": s.original_max_position_embeddings,
            "rope_type": match s.rope_type { Llama3RopeType::Llama3 => "llama3", Llama3RopeType::Default => "default" },
        }),
    };
    // A zero head count would divide by zero inside candle at load; report it as null here.
    let head_dim = cfg.hidden_size.checked_div(cfg.num_attention_heads);
    json!({
        "hidden_size": cfg.hidden_size,
        "intermediate_size": cfg.intermediate_size,
        "vocab_size": cfg.vocab_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_key_value_heads,
        "head_dim": head_dim,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": eos,
        "rope_scaling": rope_scaling,
        "max_position_embeddings": cfg.max_position_embeddings,
        "tie_word_embeddings": cfg.tie_word_embeddings,
        "use_flash_attn": cfg.use_flash_attn,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"{"hidden_size":64,"intermediate_size":128,"vocab_size":256,"num_hidden_layers":3,
        "num_attention_heads":4,"num_key_value_heads":2,"rms_norm_eps":1e-5,"max_position_embeddings":128}"#;

    #[test]
    fn theta_defaults_to_10000_when_only_in_rope_parameters() {
        let mut v: Value = serde_json::from_str(BASE).unwrap();
        v["rope_parameters"] = json!({"rope_theta": 100000.0, "rope_type": "default"});
        let cfg = parse(&v.to_string(), false).unwrap();
        assert_eq!(effective(&cfg)["rope_theta"], json!(10000.0));
        assert_eq!(effective(&cfg)["head_dim"], json!(16));
    }

    #[test]
    fn legacy_linear_scaling_is_refused() {
        let mut v: Value = serde_json::from_str(BASE).unwrap();
        v["rope_scaling"] = json!({"type": "linear", "factor": 2.0});
        match parse(&v.to_string(), false) {
            Err(Failure::Config(m)) => assert!(m.contains("missing field"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
