//! One JSON line per config on stdin, `{"family": "phi3", "config": "<config.json text>"}`; one line
//! per config on stdout, `{"ok": true}` or `{"ok": false, "error": "<serde_json's message>"}`:
//! what `serde_json::from_str` makes of the text for the family's config struct in the candle
//! release this was built against. The modules every release from 0.9.1 has, and with the
//! `from-0-9-2` feature (fixtures/release_oracle.py sets it from 0.9.2 on) the ones 0.9.2 added.
use candle_transformers::models as m;
use std::io::{BufRead, Write};

fn de<T: serde::de::DeserializeOwned>(text: &str) -> Result<(), String> {
    serde_json::from_str::<T>(text).map(|_| ()).map_err(|e| e.to_string())
}

/// The modules candle-transformers 0.9.2 added (smol/smollm3.rs, glm4_new.rs).
#[cfg(feature = "from-0-9-2")]
fn since_0_9_2(family: &str, text: &str) -> Option<Result<(), String>> {
    match family {
        "smollm3" => Some(de::<m::smol::smollm3::Config>(text)),
        "glm4_new" => Some(de::<m::glm4_new::Config>(text)),
        _ => None,
    }
}

#[cfg(not(feature = "from-0-9-2"))]
fn since_0_9_2(_family: &str, _text: &str) -> Option<Result<(), String>> {
    None
}

fn parse(family: &str, text: &str) -> Result<(), String> {
    if let Some(r) = since_0_9_2(family, text) {
        return r;
    }
    match family {
        "llama" => de::<m::llama::LlamaConfig>(text),
        "mistral" => de::<m::mistral::Config>(text),
        "mixtral" => de::<m::mixtral::Config>(text),
        "qwen2" => de::<m::qwen2::Config>(text),
        "gemma" => de::<m::gemma::Config>(text),
        "gemma2" => de::<m::gemma2::Config>(text),
        "gemma3" => de::<m::gemma3::Config>(text),
        "granite" => de::<m::granite::GraniteConfig>(text),
        "phi3" => de::<m::phi3::Config>(text),
        "phi" => de::<m::phi::Config>(text),
        "qwen2_moe" => de::<m::qwen2_moe::Config>(text),
        other => Err(format!("portkit-release-oracle: no family {other}")),
    }
}

fn main() {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let req: serde_json::Value = serde_json::from_str(&line.expect("stdin")).expect("a JSON request line");
        let family = req["family"].as_str().unwrap_or("");
        let text = req["config"].as_str().unwrap_or("");
        let reply = match parse(family, text) {
            Ok(()) => serde_json::json!({"ok": true}),
            Err(e) => serde_json::json!({"ok": false, "error": e}),
        };
        writeln!(out, "{reply}").expect("stdout");
    }
}
