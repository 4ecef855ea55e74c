//! Every candle decoder family portkit runs a transformers checkpoint in: the config each
//! one's examples parse (its own serde `Config`), the model each one builds, and one runner over
//! all of them. Adding a family is one `Family` variant and one arm in each `match` below.

use crate::array::Array;
use crate::config as llama_config;
use crate::debug_fields::{self, activation_name};
use crate::failure::{guarded, Failure, Outcome};
use crate::llama::{generate_rows, ids_tensor};
use crate::mixtral_copy;
use crate::weights::shared_weights;
use candle_core::{DType, Device, Tensor};
use candle_nn::{Activation, VarBuilder};
use candle_transformers::models::{
    gemma, gemma2, gemma3, granite, llama, mistral, mixtral, phi, phi3, qwen2, qwen2_moe, stable_lm, starcoder2,
};
// the modules candle-transformers 0.9.2 added (its src/models/mod.rs; 0.9.1 has none of them): a build
// against 0.9.1 (feature `before-0-9-2`, portkit's release_build.py) runs every other family
#[cfg(not(feature = "before-0-9-2"))]
use candle_transformers::models::{glm4, glm4_new, olmo2, qwen3, qwen3_moe, smol::smollm3};
// models/gemma4/ arrived in 0.11.0 (feature `before-0-11-0` for the 0.9.x and 0.10.x builds)
#[cfg(not(feature = "before-0-11-0"))]
use candle_transformers::models::gemma4;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Llama,
    Mistral,
    Mixtral,
    Qwen2,
    Qwen3,
    Qwen3Moe,
    Gemma,
    Gemma2,
    Gemma3,
    Phi3,
    Olmo2,
    Granite,
    Starcoder2,
    StableLm,
    Phi,
    Qwen2Moe,
    SmolLm3,
    Glm4New,
    Gemma4,
}

impl Family {
    pub const ALL: [Family; 19] = [
        Family::Llama,
        Family::Mistral,
        Family::Mixtral,
        Family::Qwen2,
        Family::Qwen3,
        Family::Qwen3Moe,
        Family::Gemma,
        Family::Gemma2,
        Family::Gemma3,
        Family::Phi3,
        Family::Olmo2,
        Family::Granite,
        Family::Starcoder2,
        Family::StableLm,
        Family::Phi,
        Family::Qwen2Moe,
        Family::SmolLm3,
        Family::Glm4New,
        Family::Gemma4,
    ];

    /// The key Python's family registry uses: candle's module name.
    pub fn key(self) -> &'static str {
        match self {
            Family::Llama => "llama",
            Family::Mistral => "mistral",
            Family::Mixtral => "mixtral",
            Family::Qwen2 => "qwen2",
            Family::Qwen3 => "qwen3",
            Family::Qwen3Moe => "qwen3_moe",
            Family::Gemma => "gemma",
            Family::Gemma2 => "gemma2",
            Family::Gemma3 => "gemma3",
            Family::Phi3 => "phi3",
            Family::Olmo2 => "olmo2",
            Family::Granite => "granite",
            Family::Starcoder2 => "starcoder2",
            Family::StableLm => "stable_lm",
            Family::Phi => "phi",
            Family::Qwen2Moe => "qwen2_moe",
            Family::SmolLm3 => "smollm3",
            Family::Glm4New => "glm4_new",
            Family::Gemma4 => "gemma4",
        }
    }

    pub fn from_key(key: &str) -> Outcome<Self> {
        Self::ALL.iter().copied().find(|f| f.key() == key).ok_or_else(|| {
            let known: Vec<&str> = Self::ALL.iter().map(|f| f.key()).collect();
            Failure::Invalid(format!("unknown family `{key}`: expected one of {}", known.join(", ")))
        })
    }
}

/// A config as the family's candle module holds it after serde (and, for llama and granite,
/// `into_config(false)`, as candle's examples do).
#[derive(Debug, Clone)]
pub enum Parsed {
    Llama(llama::Config),
    Mistral(mistral::Config),
    Mixtral(mixtral::Config),
    Qwen2(qwen2::Config),
    #[cfg(not(feature = "before-0-9-2"))]
    Qwen3(qwen3::Config),
    #[cfg(not(feature = "before-0-9-2"))]
    Qwen3Moe(qwen3_moe::Config),
    Gemma(gemma::Config),
    Gemma2(gemma2::Config),
    Gemma3(gemma3::Config),
    Phi3(phi3::Config),
    #[cfg(not(feature = "before-0-9-2"))]
    Olmo2(olmo2::Config),
    Granite(granite::Config),
    Starcoder2(starcoder2::Config),
    StableLm(stable_lm::Config),
    // phi's Config fields are private to candle: the capture copy parses the same JSON into its own
    Phi(phi::Config, Box<crate::phi_copy::Config>),
    Qwen2Moe(qwen2_moe::Config),
    #[cfg(not(feature = "before-0-9-2"))]
    SmolLm3(smollm3::Config),
    #[cfg(not(feature = "before-0-9-2"))]
    Glm4New(glm4_new::Config),
    #[cfg(not(feature = "before-0-11-0"))]
    Gemma4(gemma4::config::Gemma4TextConfig),
}

fn serde<T: DeserializeOwned>(config_json: &str) -> Outcome<T> {
    serde_json::from_str(config_json).map_err(|e| Failure::Config(e.to_string()))
}

pub fn parse(family: Family, config_json: &str) -> Outcome<Parsed> {
    Ok(match family {
        Family::Llama => Parsed::Llama(llama_config::parse(config_json, false)?),
        Family::Mistral => Parsed::Mistral(serde(config_json)?),
        Family::Mixtral => Parsed::Mixtral(serde(config_json)?),
        Family::Qwen2 => Parsed::Qwen2(serde(config_json)?),
        #[cfg(not(feature = "before-0-9-2"))]
        Family::Qwen3 => Parsed::Qwen3(serde(config_json)?),
        #[cfg(not(feature = "before-0-9-2"))]
        Family::Qwen3Moe => Parsed::Qwen3Moe(serde(config_json)?),
        Family::Gemma => Parsed::Gemma(serde(config_json)?),
        Family::Gemma2 => Parsed::Gemma2(serde(config_json)?),
        Family::Gemma3 => Parsed::Gemma3(serde(config_json)?),
        Family::Phi3 => Parsed::Phi3(serde(config_json)?),
        #[cfg(not(feature = "before-0-9-2"))]
        Family::Olmo2 => Parsed::Olmo2(serde(config_json)?),
        Family::Granite => Parsed::Granite(serde::<granite::GraniteConfig>(config_json)?.into_config(false)),
        Family::Starcoder2 => Parsed::Starcoder2(serde(config_json)?),
        Family::StableLm => Parsed::StableLm(serde(config_json)?),
        Family::Phi => Parsed::Phi(serde(config_json)?, Box::new(serde(config_json)?)),
        Family::Qwen2Moe => Parsed::Qwen2Moe(serde(config_json)?),
        #[cfg(not(feature = "before-0-9-2"))]
        Family::SmolLm3 => Parsed::SmolLm3(serde(config_json)?),
        #[cfg(not(feature = "before-0-9-2"))]
        Family::Glm4New => Parsed::Glm4New(serde(config_json)?),
        #[cfg(not(feature = "before-0-11-0"))]
        Family::Gemma4 => Parsed::Gemma4(serde(config_json)?),
        #[cfg(feature = "before-0-9-2")]
        Family::Qwen3 | Family::Qwen3Moe | Family::Olmo2 | Family::SmolLm3 | Family::Glm4New => {
            return Err(absent(family.key(), "0.9.2"))
        }
        #[cfg(feature = "before-0-11-0")]
        Family::Gemma4 => return Err(absent(family.key(), "0.11.0")),
    })
}

/// A family or encoder whose candle module the release this crate is built against lacks.
#[cfg(any(feature = "before-0-9-2", feature = "before-0-10-0", feature = "before-0-11-0"))]
pub(crate) fn absent(key: &str, since: &str) -> Failure {
    Failure::Invalid(format!(
        "the candle-transformers this runner is built against has no `{key}` module (it arrived in {since})"
    ))
}

/// One field value as JSON; `Option` as null, `Activation` by the name candle's serde reads.
trait Emit {
    fn emit(&self) -> Value;
}

macro_rules! emit_as_number {
    ($($t:ty),*) => { $(impl Emit for $t { fn emit(&self) -> Value { json!(*self) } })* };
}
emit_as_number!(usize, u32, f64, f32, bool);

impl<T: Emit> Emit for Option<T> {
    fn emit(&self) -> Value {
        self.as_ref().map_or(Value::Null, Emit::emit)
    }
}

impl<T: Emit> Emit for Vec<T> {
    fn emit(&self) -> Value {
        Value::Array(self.iter().map(Emit::emit).collect())
    }
}

impl Emit for Value {
    fn emit(&self) -> Value {
        self.clone()
    }
}

// phi3.rs 0.9.1:41 `rope_scaling: Option<String>`
#[cfg(feature = "before-0-9-2")]
impl Emit for String {
    fn emit(&self) -> Value {
        json!(self)
    }
}

impl Emit for Activation {
    fn emit(&self) -> Value {
        activation_name(self)
    }
}

#[cfg(not(feature = "before-0-9-2"))]
impl Emit for phi3::RopeScaling {
    fn emit(&self) -> Value {
        // `type_` has one variant, serde-renamed "longrope" (phi3.rs:27-31).
        json!({"short_factor": self.short_factor, "long_factor": self.long_factor, "type": "longrope"})
    }
}

// glm4_new's eos_token_id (glm4.rs has no EosTokenId before 0.9.2)
#[cfg(not(feature = "before-0-9-2"))]
impl Emit for glm4::EosTokenId {
    fn emit(&self) -> Value {
        match self {
            glm4::EosTokenId::Single(id) => json!(id),
            glm4::EosTokenId::Multiple(ids) => json!(ids),
        }
    }
}

impl Emit for granite::GraniteEosToks {
    fn emit(&self) -> Value {
        match self {
            granite::GraniteEosToks::Single(id) => json!(id),
            granite::GraniteEosToks::Multiple(ids) => json!(ids),
        }
    }
}

impl Emit for granite::GraniteRopeConfig {
    fn emit(&self) -> Value {
        json!({
            "factor": self.factor,
            "low_freq_factor": self.low_freq_factor,
            "high_freq_factor": self.high_freq_factor,
            "original_max_position_embeddings": self.original_max_position_embeddings,
            "rope_type": match self.rope_type {
                granite::GraniteRopeType::Granite => "granite",
                granite::GraniteRopeType::Default => "default",
            },
        })
    }
}

/// `{"field": cfg.field, ...}` with the field names exactly as candle declares them.
macro_rules! fields {
    ($cfg:expr; $($f:ident),* $(,)?) => {{
        let mut m = Map::new();
        $( m.insert(stringify!($f).to_string(), Emit::emit(&$cfg.$f)); )*
        m
    }};
}

/// hidden_size / num_attention_heads, null where candle would divide by zero.
fn ratio(m: &Map<String, Value>) -> Value {
    let hidden = m.get("hidden_size").and_then(Value::as_u64);
    let heads = m.get("num_attention_heads").and_then(Value::as_u64);
    match (hidden, heads) {
        (Some(h), Some(n)) => h.checked_div(n).map_or(Value::Null, |d| json!(d)),
        _ => Value::Null,
    }
}

pub(crate) fn from_debug(cfg: &impl std::fmt::Debug) -> Map<String, Value> {
    // The Debug text comes from candle's derive on a struct of plain fields; failing to read it
    // back is a bug here, so say so loudly rather than return a partial dict.
    debug_fields::parse(&format!("{cfg:?}")).unwrap_or_else(|e| panic!("cannot read candle's Debug text: {e}"))
}

impl Parsed {
    pub fn family(&self) -> Family {
        match self {
            Parsed::Llama(_) => Family::Llama,
            Parsed::Mistral(_) => Family::Mistral,
            Parsed::Mixtral(_) => Family::Mixtral,
            Parsed::Qwen2(_) => Family::Qwen2,
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Qwen3(_) => Family::Qwen3,
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Qwen3Moe(_) => Family::Qwen3Moe,
            Parsed::Gemma(_) => Family::Gemma,
            Parsed::Gemma2(_) => Family::Gemma2,
            Parsed::Gemma3(_) => Family::Gemma3,
            Parsed::Phi3(_) => Family::Phi3,
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Olmo2(_) => Family::Olmo2,
            Parsed::Granite(_) => Family::Granite,
            Parsed::Starcoder2(_) => Family::Starcoder2,
            Parsed::StableLm(_) => Family::StableLm,
            Parsed::Phi(..) => Family::Phi,
            Parsed::Qwen2Moe(_) => Family::Qwen2Moe,
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::SmolLm3(_) => Family::SmolLm3,
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Glm4New(_) => Family::Glm4New,
            #[cfg(not(feature = "before-0-11-0"))]
            Parsed::Gemma4(_) => Family::Gemma4,
        }
    }

    /// The effective values, by candle's field names, plus `head_dim` where candle derives it.
    pub fn effective(&self) -> Value {
        let m = match self {
            Parsed::Llama(c) => return llama_config::effective(c),
            Parsed::Mistral(c) => {
                let mut m = fields!(c; vocab_size, hidden_size, intermediate_size, num_hidden_layers,
                    num_attention_heads, num_key_value_heads, hidden_act, max_position_embeddings, rms_norm_eps,
                    rope_theta, sliding_window, use_flash_attn);
                // mistral.rs:105-108: `head_dim.unwrap_or(hidden_size / num_attention_heads)`.
                let derived = ratio(&m);
                m.insert("head_dim".into(), c.head_dim.map_or(derived, |d| json!(d)));
                m
            }
            Parsed::Mixtral(c) => {
                let mut m = from_debug(c);
                // mixtral.rs:157: hidden_size / num_attention_heads (config has no head_dim).
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            Parsed::Qwen2(c) => {
                let mut m = fields!(c; vocab_size, hidden_size, intermediate_size, num_hidden_layers,
                    num_attention_heads, num_key_value_heads, max_position_embeddings, sliding_window,
                    max_window_layers, tie_word_embeddings, rope_theta, rms_norm_eps, use_sliding_window, hidden_act);
                // qwen2.rs:135: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Qwen3(c) => fields!(c; vocab_size, hidden_size, intermediate_size, num_hidden_layers,
                num_attention_heads, head_dim, attention_bias, num_key_value_heads, max_position_embeddings,
                sliding_window, max_window_layers, tie_word_embeddings, rope_theta, rms_norm_eps,
                use_sliding_window, hidden_act),
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Qwen3Moe(c) => fields!(c; vocab_size, hidden_size, intermediate_size, num_hidden_layers,
                num_attention_heads, head_dim, attention_bias, num_key_value_heads, max_position_embeddings,
                sliding_window, max_window_layers, tie_word_embeddings, rope_theta, rms_norm_eps,
                use_sliding_window, hidden_act, decoder_sparse_step, moe_intermediate_size, num_experts_per_tok,
                num_experts, norm_topk_prob),
            Parsed::Gemma(c) => fields!(c; attention_bias, head_dim, hidden_act, hidden_activation, hidden_size,
                intermediate_size, num_attention_heads, num_hidden_layers, num_key_value_heads, rms_norm_eps,
                rope_theta, vocab_size, max_position_embeddings),
            Parsed::Gemma2(c) => fields!(c; attention_bias, head_dim, hidden_activation, hidden_size,
                intermediate_size, num_attention_heads, num_hidden_layers, num_key_value_heads, rms_norm_eps,
                rope_theta, vocab_size, final_logit_softcapping, attn_logit_softcapping, query_pre_attn_scalar,
                sliding_window, max_position_embeddings),
            Parsed::Gemma3(c) => fields!(c; attention_bias, head_dim, hidden_activation, hidden_size,
                intermediate_size, num_attention_heads, num_hidden_layers, num_key_value_heads, rms_norm_eps,
                rope_theta, rope_local_base_freq, vocab_size, final_logit_softcapping, attn_logit_softcapping,
                query_pre_attn_scalar, sliding_window, sliding_window_pattern, max_position_embeddings),
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Phi3(c) => {
                let mut m = fields!(c; vocab_size, hidden_act, hidden_size, intermediate_size, num_hidden_layers,
                    num_attention_heads, num_key_value_heads, rms_norm_eps, rope_theta, bos_token_id, eos_token_id,
                    rope_scaling, max_position_embeddings, original_max_position_embeddings,
                    partial_rotary_factor, tie_word_embeddings);
                // phi3.rs:64-66 `Config::head_dim`: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            // phi3.rs 0.9.1:28-42: `rope_scaling` a String, no LongRoPE, partial rotary or tied embeddings yet
            #[cfg(feature = "before-0-9-2")]
            Parsed::Phi3(c) => {
                let mut m = fields!(c; vocab_size, hidden_act, hidden_size, intermediate_size, num_hidden_layers,
                    num_attention_heads, num_key_value_heads, rms_norm_eps, rope_theta, bos_token_id, eos_token_id,
                    rope_scaling, max_position_embeddings);
                // phi3.rs:64-66 `Config::head_dim`: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Olmo2(c) => {
                let mut m = fields!(c; vocab_size, hidden_size, intermediate_size, attention_bias,
                    num_hidden_layers, num_attention_heads, num_key_value_heads, rms_norm_eps, hidden_act,
                    max_position_embeddings, rope_theta, tie_word_embeddings, clip_qkv);
                // olmo2.rs:126: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            Parsed::Granite(c) => {
                let mut m = fields!(c; hidden_size, intermediate_size, vocab_size, num_hidden_layers,
                    num_attention_heads, num_key_value_heads, use_flash_attn, rms_norm_eps, rope_theta,
                    bos_token_id, eos_token_id, rope_scaling, max_position_embeddings);
                // granite.rs:112: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            Parsed::Starcoder2(c) => {
                let mut m = from_debug(c);
                // starcoder2.rs:137: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            Parsed::StableLm(c) => {
                let mut m = from_debug(c);
                // stable_lm.rs:63-65 `Config::head_dim`: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            Parsed::Phi(c, _) => {
                let mut m = from_debug(c);
                // phi.rs:44-50: `num_key_value_heads.unwrap_or(num_attention_heads)`, and
                // `head_dim` hidden_size / num_attention_heads.
                let heads = m.get("num_attention_heads").cloned().unwrap_or(Value::Null);
                if m.get("num_key_value_heads").is_none_or(Value::is_null) {
                    m.insert("num_key_value_heads".into(), heads);
                }
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            Parsed::Qwen2Moe(c) => {
                let mut m = fields!(c; vocab_size, hidden_size, intermediate_size, num_hidden_layers,
                    num_attention_heads, num_key_value_heads, max_position_embeddings, sliding_window,
                    max_window_layers, tie_word_embeddings, rope_theta, rms_norm_eps, use_sliding_window, hidden_act,
                    decoder_sparse_step, moe_intermediate_size, shared_expert_intermediate_size, num_experts_per_tok,
                    num_experts, norm_topk_prob);
                // qwen2_moe.rs:56, :140: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::SmolLm3(c) => {
                let mut m = fields!(c; vocab_size, hidden_size, intermediate_size, num_hidden_layers,
                    num_attention_heads, num_key_value_heads, max_position_embeddings, tie_word_embeddings,
                    rope_theta, rms_norm_eps, hidden_act, attention_bias, attention_dropout, mlp_bias, sliding_window,
                    use_sliding_window, rope_scaling, bos_token_id, eos_token_id, pad_token_id, max_window_layers,
                    no_rope_layers, no_rope_layer_interval);
                // smol/smollm3.rs:60-62 `Config::head_dim`: hidden_size / num_attention_heads.
                m.insert("head_dim".into(), ratio(&m));
                m
            }
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Glm4New(c) => {
                let mut m = fields!(c; vocab_size, hidden_size, intermediate_size, num_hidden_layers,
                    num_attention_heads, head_dim, partial_rotary_factor, attention_bias, num_key_value_heads,
                    max_position_embeddings, sliding_window, tie_word_embeddings, rope_theta, rms_norm_eps, hidden_act,
                    eos_token_id);
                // glm4_new.rs:39-41, :136-138: `head_dim.unwrap_or(hidden_size / num_attention_heads)`; no
                // q/k/v bias without `attention_bias` (:143-160). (No `partial_rotary_factor`: the whole head.)
                if m.get("head_dim").is_none_or(Value::is_null) {
                    let r = ratio(&m);
                    m.insert("head_dim".into(), r);
                }
                if m.get("attention_bias").is_none_or(Value::is_null) {
                    m.insert("attention_bias".into(), json!(false));
                }
                m
            }
            #[cfg(not(feature = "before-0-11-0"))]
            Parsed::Gemma4(c) => {
                let mut m = from_debug(c);
                // gemma4/config.rs:123-137: the rotated share of the full layers and the sliding layers' base,
                // derived from `rope_parameters` with candle's defaults
                m.insert("partial_rotary_factor".into(), json!(c.partial_rotary_factor()));
                m.insert("rope_local_base_freq".into(), json!(c.rope_local_base_freq()));
                m
            }
        };
        Value::Object(m)
    }

    /// Builds the library's model for this family, as candle's examples do; `use_flash_attn`
    /// arguments get false.
    pub fn build(&self, vb: VarBuilder, cache_dtype: DType) -> candle_core::Result<Model> {
        let device = vb.device().clone();
        Ok(match self {
            Parsed::Llama(c) => Model::Llama {
                model: llama::Llama::load(vb, c)?,
                cache: llama::Cache::new(true, cache_dtype, c, &device)?,
            },
            Parsed::Granite(c) => Model::Granite {
                model: granite::Granite::load(vb, c)?,
                cache: granite::Cache::new(true, cache_dtype, c, &device)?,
            },
            Parsed::Mistral(c) => Model::Mistral(mistral::Model::new(c, vb)?),
            Parsed::Mixtral(c) => Model::Mixtral(mixtral::Model::new(c, vb)?),
            Parsed::Qwen2(c) => Model::Qwen2(qwen2::ModelForCausalLM::new(c, vb)?),
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Qwen3(c) => Model::Qwen3(qwen3::ModelForCausalLM::new(c, vb)?),
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Qwen3Moe(c) => Model::Qwen3Moe(qwen3_moe::ModelForCausalLM::new(c, vb)?),
            Parsed::Gemma(c) => Model::Gemma(gemma::Model::new(false, c, vb)?),
            Parsed::Gemma2(c) => Model::Gemma2(gemma2::Model::new(false, c, vb)?),
            Parsed::Gemma3(c) => Model::Gemma3(gemma3::Model::new(false, c, vb)?),
            Parsed::Phi3(c) => Model::Phi3(phi3::Model::new(c, vb)?),
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Olmo2(c) => Model::Olmo2(olmo2::Model::new(c, vb)?),
            Parsed::Starcoder2(c) => Model::Starcoder2(starcoder2::Model::new(c, vb)?),
            Parsed::StableLm(c) => Model::StableLm(stable_lm::Model::new(c, vb)?),
            Parsed::Phi(c, _) => Model::Phi(phi::Model::new(c, vb)?),
            Parsed::Qwen2Moe(c) => Model::Qwen2Moe(qwen2_moe::Model::new(c, vb)?),
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::SmolLm3(c) => Model::SmolLm3(smollm3::ModelForCausalLM::new(c, vb)?),
            #[cfg(not(feature = "before-0-9-2"))]
            Parsed::Glm4New(c) => Model::Glm4New(glm4_new::ModelForCausalLM::new(c, vb)?),
            #[cfg(not(feature = "before-0-11-0"))]
            Parsed::Gemma4(c) => Model::Gemma4(gemma4::text::TextModel::new(c, vb)?),
        })
    }
}

/// The key a patched config.json carries to ask for a program other than the library's module
/// (verify's counterfactuals; never in a checkpoint's config): its one value today,
/// `MIXTRAL_ROUTING_IN_DTYPE`, is candle's mixtral with PK308's fix (`crate::mixtral_copy`).
pub const CANDLE_PATCH_KEY: &str = "portkit_candle_patch";
pub const MIXTRAL_ROUTING_IN_DTYPE: &str = "mixtral-routing-weights-in-dtype";

/// The program `config_json` asks for under `CANDLE_PATCH_KEY`, checked against `family`; None:
/// the library's module.
fn candle_patch(family: Family, config_json: &str) -> Outcome<Option<mixtral_copy::Config>> {
    let value: Value = serde_json::from_str(config_json).map_err(|e| Failure::Invalid(format!("config.json: {e}")))?;
    match value.get(CANDLE_PATCH_KEY) {
        None => Ok(None),
        Some(Value::String(p)) if p == MIXTRAL_ROUTING_IN_DTYPE && family == Family::Mixtral => Ok(Some(serde(config_json)?)),
        Some(other) => Err(Failure::Invalid(format!(
            "{CANDLE_PATCH_KEY}: {other} is not a program portkit has for {} (known: \"{MIXTRAL_ROUTING_IN_DTYPE}\" for mixtral)",
            family.key()
        ))),
    }
}

/// The library's model for each family. llama and granite keep their KV cache outside the model.
pub enum Model {
    Llama { model: llama::Llama, cache: llama::Cache },
    Granite { model: granite::Granite, cache: granite::Cache },
    Mistral(mistral::Model),
    Mixtral(mixtral::Model),
    /// candle's mixtral with its routing weights cast to the activations' dtype (PK308's fix)
    MixtralRepaired(mixtral_copy::Model, mixtral_copy::Config),
    Qwen2(qwen2::ModelForCausalLM),
    #[cfg(not(feature = "before-0-9-2"))]
    Qwen3(qwen3::ModelForCausalLM),
    #[cfg(not(feature = "before-0-9-2"))]
    Qwen3Moe(qwen3_moe::ModelForCausalLM),
    Gemma(gemma::Model),
    Gemma2(gemma2::Model),
    Gemma3(gemma3::Model),
    Phi3(phi3::Model),
    #[cfg(not(feature = "before-0-9-2"))]
    Olmo2(olmo2::Model),
    Starcoder2(starcoder2::Model),
    StableLm(stable_lm::Model),
    Phi(phi::Model),
    Qwen2Moe(qwen2_moe::Model),
    #[cfg(not(feature = "before-0-9-2"))]
    SmolLm3(smollm3::ModelForCausalLM),
    #[cfg(not(feature = "before-0-9-2"))]
    Glm4New(glm4_new::ModelForCausalLM),
    #[cfg(not(feature = "before-0-11-0"))]
    Gemma4(gemma4::text::TextModel),
}

impl Model {
    /// The library's `forward(ids, position)`: the last position's logits.
    pub(crate) fn forward(&mut self, x: &Tensor, pos: usize) -> candle_core::Result<Tensor> {
        match self {
            Model::Llama { model, cache } => model.forward(x, pos, cache),
            Model::Granite { model, cache } => model.forward(x, pos, cache),
            Model::Mistral(m) => m.forward(x, pos),
            Model::Mixtral(m) => m.forward(x, pos),
            Model::MixtralRepaired(m, _) => m.forward(x, pos),
            Model::Qwen2(m) => m.forward(x, pos),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Qwen3(m) => m.forward(x, pos),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Qwen3Moe(m) => m.forward(x, pos),
            Model::Gemma(m) => m.forward(x, pos),
            Model::Gemma2(m) => m.forward(x, pos),
            Model::Gemma3(m) => m.forward(x, pos),
            Model::Phi3(m) => m.forward(x, pos),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Olmo2(m) => m.forward(x, pos),
            Model::Starcoder2(m) => m.forward(x, pos),
            Model::StableLm(m) => m.forward(x, pos),
            // phi.rs:344: the position is the KV cache's length (phi.rs:215-218)
            Model::Phi(m) => m.forward(x),
            Model::Qwen2Moe(m) => m.forward(x, pos),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::SmolLm3(m) => m.forward(x, pos),
            #[cfg(not(feature = "before-0-9-2"))]
            Model::Glm4New(m) => m.forward(x, pos),
            // gemma4/text.rs:616-649: the last position's logits, (b, 1, vocab)
            #[cfg(not(feature = "before-0-11-0"))]
            Model::Gemma4(m) => m.forward(x, pos),
        }
    }
}

pub struct FamilyRunner {
    pub(crate) parsed: Parsed,
    pub(crate) model: Model,
    /// The loaded tensors: mixtral's and stable_lm's rebuild and `capture` reuse them.
    pub(crate) vb: VarBuilder<'static>,
    cache_dtype: DType,
    pub(crate) device: Device,
}

impl FamilyRunner {
    pub fn load(
        family: Family,
        weight_files: Vec<PathBuf>,
        config_json: &str,
        dtype: DType,
        cache_dtype: Option<DType>,
        device: Device,
    ) -> Outcome<Self> {
        let parsed = parse(family, config_json)?;
        let repaired = candle_patch(family, config_json)?;
        for f in &weight_files {
            if !f.is_file() {
                return Err(Failure::NotFound(format!("weight file not found: {}", f.display())));
            }
        }
        let cache_dtype = cache_dtype.unwrap_or(dtype);
        guarded(|| {
            let vb = shared_weights(&weight_files, dtype, &device)?;
            let model = match repaired {
                Some(c) => Model::MixtralRepaired(mixtral_copy::Model::new(&c, vb.clone())?, c),
                None => parsed.build(vb.clone(), cache_dtype)?,
            };
            Ok(Self {
                parsed: parsed.clone(),
                model,
                vb,
                cache_dtype,
                device: device.clone(),
            })
        })
    }

    pub fn family(&self) -> Family {
        self.parsed.family()
    }

    pub fn parsed(&self) -> &Parsed {
        &self.parsed
    }

    /// Starts every call from an empty KV cache. mixtral and stable_lm have no `clear_kv_cache`
    /// (their caches are private), so those two are rebuilt from the tensors already loaded.
    pub(crate) fn fresh(&mut self) -> Outcome<()> {
        match (&mut self.model, &self.parsed) {
            (Model::Llama { cache, .. }, Parsed::Llama(c)) => {
                *cache = llama::Cache::new(true, self.cache_dtype, c, &self.device)?
            }
            (Model::Granite { cache, .. }, Parsed::Granite(c)) => {
                *cache = granite::Cache::new(true, self.cache_dtype, c, &self.device)?
            }
            (Model::Mixtral(m), Parsed::Mixtral(c)) => *m = mixtral::Model::new(c, self.vb.clone())?,
            (Model::MixtralRepaired(m, c), _) => *m = mixtral_copy::Model::new(c, self.vb.clone())?,
            (Model::StableLm(m), Parsed::StableLm(c)) => *m = stable_lm::Model::new(c, self.vb.clone())?,
            (Model::Mistral(m), _) => m.clear_kv_cache(),
            (Model::Qwen2(m), _) => m.clear_kv_cache(),
            #[cfg(not(feature = "before-0-9-2"))]
            (Model::Qwen3(m), _) => m.clear_kv_cache(),
            #[cfg(not(feature = "before-0-9-2"))]
            (Model::Qwen3Moe(m), _) => m.clear_kv_cache(),
            (Model::Gemma(m), _) => m.clear_kv_cache(),
            (Model::Gemma2(m), _) => m.clear_kv_cache(),
            (Model::Gemma3(m), _) => m.clear_kv_cache(),
            (Model::Phi3(m), _) => m.clear_kv_cache(),
            #[cfg(not(feature = "before-0-9-2"))]
            (Model::Olmo2(m), _) => m.clear_kv_cache(),
            (Model::Starcoder2(m), _) => m.clear_kv_cache(),
            (Model::Phi(m), _) => m.clear_kv_cache(),
            (Model::Qwen2Moe(m), _) => m.clear_kv_cache(),
            #[cfg(not(feature = "before-0-9-2"))]
            (Model::SmolLm3(m), _) => m.clear_kv_cache(),
            #[cfg(not(feature = "before-0-9-2"))]
            (Model::Glm4New(m), _) => m.clear_kv_cache(),
            #[cfg(not(feature = "before-0-11-0"))]
            (Model::Gemma4(m), _) => m.clear_kv_cache(),
            _ => unreachable!("model and config come from the same family"),
        }
        Ok(())
    }

    pub(crate) fn forward_row(&mut self, ids: &[u32], pos: usize) -> Outcome<Vec<f32>> {
        let x = ids_tensor(ids, &self.device)?;
        let logits = self.model.forward(&x, pos)?;
        Ok(logits.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
    }

    /// Last-position logits of one forward over `ids` through the library's model.
    pub fn last_logits(&mut self, ids: &[u32]) -> Outcome<Vec<f32>> {
        guarded(|| {
            self.fresh()?;
            self.forward_row(ids, 0)
        })
    }

    /// Same rows as `LlamaRunner::teacher_forced_logits`: row j holds the logits after
    /// `ids[..prefill + j]`, the first from the prefill, the rest one token at a time.
    pub fn teacher_forced_logits(&mut self, ids: &[u32], prefill: usize) -> Outcome<Array> {
        if prefill == 0 || prefill > ids.len() {
            return Err(Failure::Invalid(format!("prefill must be in 1..={}, got {prefill}", ids.len())));
        }
        guarded(|| {
            self.fresh()?;
            let mut data = self.forward_row(&ids[..prefill], 0)?;
            let vocab = data.len();
            for (pos, &id) in ids.iter().enumerate().skip(prefill) {
                data.extend(self.forward_row(&[id], pos)?);
            }
            Ok(Array { shape: vec![ids.len() - prefill + 1, vocab], data })
        })
    }

    /// `LlamaRunner::generate`: greedy tokens and every step's logits in one pass.
    pub fn generate(&mut self, ids: &[u32], n: usize) -> Outcome<(Vec<u32>, Array)> {
        guarded(|| {
            self.fresh()?;
            let first = self.forward_row(ids, 0)?;
            generate_rows(first, ids.len(), n, |id, pos| self.forward_row(&[id], pos))
        })
    }

    /// `LlamaRunner::greedy`.
    pub fn greedy(&mut self, ids: &[u32], n: usize) -> Outcome<Vec<u32>> {
        if n == 0 {
            return Ok(Vec::new());
        }
        Ok(self.generate(ids, n)?.0)
    }

    /// Per-layer values from the family's copy of the forward, built from the tensors this
    /// runner already loaded: no second load, no second copy of the weights.
    pub fn capture(&self, ids: &[u32]) -> Outcome<Vec<(String, Array)>> {
        capture_with(&self.parsed, self.vb.clone(), ids, self.cache_dtype, &self.device)
    }
}

/// Families with a copy of the forward proven bit-identical to the library.
pub const CAPTURE_FAMILIES: [Family; 15] = [
    Family::Llama,
    Family::Mistral,
    Family::Qwen2,
    Family::Qwen3,
    Family::Gemma,
    Family::Gemma2,
    Family::Gemma3,
    Family::Phi3,
    Family::Olmo2,
    Family::Granite,
    Family::Phi,
    Family::Qwen2Moe,
    Family::SmolLm3,
    Family::Glm4New,
    Family::Gemma4,
];

/// Per-layer capture (embeddings, layer.N, norm, logits) through the family's copy of the
/// forward, loaded alone from the files (no runner).
pub fn capture_layers(
    family: Family,
    weight_files: &[PathBuf],
    config_json: &str,
    ids: &[u32],
    dtype: DType,
    cache_dtype: Option<DType>,
    device: &Device,
) -> Outcome<Vec<(String, Array)>> {
    let parsed = parse(family, config_json)?;
    if !CAPTURE_FAMILIES.contains(&family) {
        return Err(Failure::NotImplemented(format!("per-layer: not available for {}", family.key())));
    }
    let vb = guarded(|| Ok(shared_weights(weight_files, dtype, device)?))?;
    capture_with(&parsed, vb, ids, cache_dtype.unwrap_or(dtype), device)
}

/// Per-layer capture through the family's copy of the forward, built from `vb`.
pub fn capture_with(parsed: &Parsed, vb: VarBuilder<'static>, ids: &[u32], cache_dtype: DType, device: &Device) -> Outcome<Vec<(String, Array)>> {
    match parsed {
        Parsed::Llama(c) => crate::llama::capture_with(vb, c, ids, cache_dtype, device),
        Parsed::Mistral(c) => guarded(|| {
            let mut copy = crate::mistral_copy::Model::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        Parsed::Qwen2(c) => guarded(|| {
            let mut copy = crate::qwen2_copy::ModelForCausalLM::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        #[cfg(not(feature = "before-0-9-2"))]
        Parsed::Qwen3(c) => guarded(|| {
            let mut copy = crate::qwen3_copy::ModelForCausalLM::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        Parsed::Gemma(c) => guarded(|| {
            let mut copy = crate::gemma_copy::Model::new(false, c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        Parsed::Gemma3(c) => guarded(|| {
            let mut copy = crate::gemma3_copy::Model::new(false, c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        #[cfg(not(feature = "before-0-9-2"))]
        Parsed::Olmo2(c) => guarded(|| {
            let mut copy = crate::olmo2_copy::Model::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        Parsed::Granite(c) => guarded(|| {
            let copy = crate::granite_copy::Granite::load(vb, c)?;
            let mut cache = crate::granite_copy::Cache::new(true, cache_dtype, c, device)?;
            copy.capture(&ids_tensor(ids, device)?, &mut cache)
        }),
        Parsed::Gemma2(c) => guarded(|| {
            let mut copy = crate::gemma2_copy::Model::new(false, c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        Parsed::Phi3(c) => guarded(|| {
            let mut copy = crate::phi3_copy::Model::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        Parsed::Phi(_, c) => guarded(|| {
            let mut copy = crate::phi_copy::Model::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        Parsed::Qwen2Moe(c) => guarded(|| {
            let mut copy = crate::qwen2_moe_copy::Model::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        #[cfg(not(feature = "before-0-11-0"))]
        Parsed::Gemma4(c) => guarded(|| {
            let mut copy = crate::gemma4_copy::TextModel::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        #[cfg(not(feature = "before-0-9-2"))]
        Parsed::SmolLm3(c) => guarded(|| {
            let mut copy = crate::smollm3_copy::ModelForCausalLM::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        #[cfg(not(feature = "before-0-9-2"))]
        Parsed::Glm4New(c) => guarded(|| {
            let mut copy = crate::glm4_new_copy::ModelForCausalLM::new(c, vb)?;
            copy.capture(&ids_tensor(ids, device)?)
        }),
        other => Err(Failure::NotImplemented(format!("per-layer: not available for {}", other.family().key()))),
    }
}
