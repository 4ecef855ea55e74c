//! One JSON line per config on stdin, `{"family": "phi3", "config": "<config.json text>"}`; one line
//! per config on stdout, `{"ok": true}` or `{"ok": false, "error": "<serde_json's message>"}`:
//! what `serde_json::from_str` makes of the text for the family's config struct in the candle
//! release this was built against. Only the modules every release from 0.9.1 has.
use candle_transformers::models as m;
use std::io::{BufRead, Write};

fn parse(family: &str, text: &str) -> Result<(), String> {
    fn de<T: serde::de::DeserializeOwned>(text: &str) -> Result<(), String> {
        serde_json::from_str::<T>(text).map(|_| ()).map_err(|e| e.to_string())
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
