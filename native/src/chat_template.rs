//! A model's chat template rendered the way the Rust programs candle users run render it.
//!
//! transformers renders it with jinja2 (`render_jinja_template`, utils/chat_template_utils.py);
//! a Rust program renders it with the `minijinja` crate, in an environment set up the way that
//! program sets it up. Two of them, named after what users run:
//!
//! - `candle-examples`: candle's candle-examples-0.11.0/src/chat_template.rs (the crate on
//!   crates.io; the same file at huggingface/candle 2a13b0f): `Environment::new()` with only `raise_exception` added (:167-174), the template
//!   named "chat" (:176), a context of `messages` as `Message { role, content }` strings
//!   (:41-44), `add_generation_prompt`, `continue_final_message` and `enable_thinking` (false
//!   unless asked), `bos_token` and `eos_token` from tokenizer_config.json, "" when absent
//!   (:213-220, :342-350); the result `trim_start()`ed (:353). Its minijinja has default features
//!   and `loader` (candle-examples-0.11.0/Cargo.toml:658-660, `minijinja = { version = "2", features = ["loader"] }`): no `json` (so no `tojson` filter), no
//!   `preserve_order` (maps iterate in key order), no pycompat, no trim_blocks or lstrip_blocks.
//! - `mistral.rs`: mistralrs-core/src/pipeline/chat_template.rs `apply_chat_template_to`
//!   (EricLBuehler/mistral.rs at 9e92262, v0.9.2): pycompat's unknown-method callback (:712),
//!   lstrip_blocks and trim_blocks (:715-716), its rewrites of the template text (:463-468,
//!   :783-801), `raise_exception`, its own `tojson` and `strftime_now` (UTC) (:804-806, :358-434),
//!   a context with `date_string` (today, UTC), `enable_thinking` true unless asked
//!   (request.rs:146), `bos_token`/`eos_token`/`unk_token` as options (`none` when absent), and
//!   `tools`, `xml_tools`, `builtin_tools` when tools are given (:809-871); messages as its
//!   OpenAI server builds them (mistralrs-server-core/src/chat_completion.rs:637-705) and tools
//!   as `tool_template_value` orders them (:526-563).
//!
//! Both run minijinja 2.14.0, mistral.rs's locked version (Cargo.toml). A refusal (a syntax
//! error when the template is added, an error while rendering) is `Failure::Template` with the
//! program's own error text; a conversation the program cannot be given is `Failure::Invalid`.

use crate::failure::{guarded, Failure, Outcome};
use minijinja::value::{Kwargs, ValueKind};
use minijinja::{context, Environment, Error, ErrorKind, Value};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renderer {
    CandleExamples,
    MistralRs,
}

impl Renderer {
    pub const ALL: [Renderer; 2] = [Renderer::CandleExamples, Renderer::MistralRs];

    pub fn key(self) -> &'static str {
        match self {
            Renderer::CandleExamples => "candle-examples",
            Renderer::MistralRs => "mistral.rs",
        }
    }

    pub fn from_key(key: &str) -> Outcome<Self> {
        Self::ALL
            .into_iter()
            .find(|r| r.key() == key)
            .ok_or_else(|| Failure::Invalid(format!("unknown chat-template environment {key:?} (expected candle-examples or mistral.rs)")))
    }
}

/// What a program is asked to render: the conversation as transformers takes it (messages and
/// tools as JSON, key order kept) and the special tokens tokenizer_config.json names.
#[derive(Debug, Deserialize)]
pub struct Request {
    pub messages: Value,
    #[serde(default)]
    pub add_generation_prompt: bool,
    #[serde(default)]
    pub tools: Option<Value>,
    #[serde(default)]
    pub bos_token: Option<String>,
    #[serde(default)]
    pub eos_token: Option<String>,
    #[serde(default)]
    pub unk_token: Option<String>,
}

/// Settings that replace the environment's own, for a counterfactual (verify measures whether a
/// finding's cause is the cause): None keeps what the program sets.
#[derive(Debug, Clone, Copy, Default)]
pub struct Switches {
    pub trim_blocks: Option<bool>,
    pub lstrip_blocks: Option<bool>,
}

impl Switches {
    fn apply(&self, env: &mut Environment<'_>) {
        if let Some(on) = self.trim_blocks {
            env.set_trim_blocks(on);
        }
        if let Some(on) = self.lstrip_blocks {
            env.set_lstrip_blocks(on);
        }
    }
}

/// `request_json` (a [`Request`]) rendered through `template` in `renderer`'s environment.
pub fn render(renderer: Renderer, template: &str, request_json: &str, switches: Switches) -> Outcome<String> {
    guarded(|| {
        let request: Request = serde_json::from_str(request_json).map_err(|e| Failure::Invalid(format!("chat request: {e}")))?;
        match renderer {
            Renderer::CandleExamples => candle_examples(template, &request, switches),
            Renderer::MistralRs => mistral_rs(template, &request, switches),
        }
    })
}

/// Both programs' `raise_exception`: an `InvalidOperation` error carrying the template's text.
fn raise_exception(msg: String) -> Result<String, Error> {
    Err(Error::new(ErrorKind::InvalidOperation, msg))
}

fn messages_of(request: &Request) -> Outcome<Vec<Value>> {
    let it = request.messages.try_iter().map_err(|e| Failure::Invalid(format!("chat request: messages: {e}")))?;
    Ok(it.collect())
}

fn string_field(message: &Value, key: &str) -> Option<String> {
    let v = message.get_attr(key).ok()?;
    (v.kind() == ValueKind::String).then(|| v.as_str().unwrap_or_default().to_string())
}

// --------------------------------------------------------------------------- candle-examples

fn candle_examples(template: &str, request: &Request, switches: Switches) -> Outcome<String> {
    // `Message { role: String, content: String }` (chat_template.rs:41-44) and a context without
    // tools (:342-350): a conversation with tools, another key (None aside) or a non-string role or
    // content cannot be given to it. Serialized without `preserve_order`, a message iterates in
    // key order (content, role).
    if request.tools.as_ref().is_some_and(|t| t.len().unwrap_or(0) > 0) {
        return Err(Failure::Invalid("candle-examples: its context has no `tools` (chat_template.rs:342-350)".into()));
    }
    let mut messages = Vec::new();
    for (i, m) in messages_of(request)?.iter().enumerate() {
        if let Ok(keys) = m.try_iter() {
            for key in keys {
                let k = key.as_str().unwrap_or_default();
                let v = m.get_item(&key).unwrap_or(Value::UNDEFINED);
                if k != "role" && k != "content" && !v.is_none() {
                    return Err(Failure::Invalid(format!(
                        "candle-examples: message {i} has `{k}`: its `Message` holds `role` and `content` only (chat_template.rs:41-44)"
                    )));
                }
            }
        }
        let mut fields = BTreeMap::new();
        for key in ["role", "content"] {
            let v = string_field(m, key).ok_or_else(|| {
                Failure::Invalid(format!(
                    "candle-examples: message {i} has no string `{key}`: its `Message` holds `role` and `content` strings (chat_template.rs:41-44)"
                ))
            })?;
            fields.insert(key, v);
        }
        messages.push(fields);
    }
    let mut env = Environment::new();
    // our minijinja is built with `json` (mistral.rs's features); candle-examples' is not
    env.remove_filter("tojson");
    env.add_function("raise_exception", raise_exception);
    switches.apply(&mut env);
    env.add_template("chat", template).map_err(|e| Failure::Template(format!("Template error: {e}")))?;
    let tmpl = env.get_template("chat").map_err(|e| Failure::Template(format!("Template error: {e}")))?;
    let rendered = tmpl
        .render(context! {
            messages => messages,
            add_generation_prompt => request.add_generation_prompt,
            continue_final_message => false,
            enable_thinking => false,
            bos_token => request.bos_token.clone().unwrap_or_default(),
            eos_token => request.eos_token.clone().unwrap_or_default(),
        })
        .map_err(|e| Failure::Template(format!("Render error: {e}")))?;
    Ok(rendered.trim_start().to_string())
}

// --------------------------------------------------------------------------- mistral.rs

/// Templates whose messages mistral.rs rewrites before rendering (Gemma 4's and Liquid's tool
/// formats, chat_template.rs:439-445, :765-771): not reproduced here.
fn preprocessed_by_mistral_rs(template: &str) -> Option<&'static str> {
    if template.contains("<|tool_call>") && template.contains("<tool_call|>") {
        Some("Gemma 4 tool template")
    } else if template.contains("<|tool_call_start|>") && template.contains("<|tool_call_end|>") {
        Some("Liquid tool template")
    } else {
        None
    }
}

/// mistral.rs's edits of the template text before it is added (chat_template.rs:463-468, :783-801).
pub fn mistral_rs_rewrites(template: &str) -> String {
    let mut t = template.replace("namespace(name=tcid if tcid else '')", "namespace(name=(tcid if tcid else ''))");
    t = t.replace("[::-1]", "|reverse");
    let descending = regex::Regex::new(r"range\((?P<expr>[^,]+),\s*-1,\s*-1\)").expect("a valid regex");
    t = descending.replace_all(&t, "range($expr)|reverse").into_owned();
    if t.contains("{{ meta }}") {
        t = t.replace("{%- set meta = message.get(\"metadata\", \"\") %}", "");
        t = t.replace("{{ meta }}", "");
    }
    let generation = regex::Regex::new(r"\{%-?\s*(?:end)?generation\s*-?%\}").expect("a valid regex");
    generation.replace_all(&t, "").into_owned()
}

/// One message as mistral.rs's OpenAI server hands it to the template
/// (chat_completion.rs:637-705): role, content ("" when absent and tool calls are given),
/// reasoning_content, tool_calls rebuilt as `{id, type: "function", function: {name, arguments}}`
/// (the id falls back to the function's name), tool_call_id, name; keys whose value is None, and
/// any other key, are not passed. Tool-call arguments given as a JSON object string are parsed
/// (chat_template.rs:494-524, :764).
fn mistral_message(i: usize, m: &Value) -> Outcome<Value> {
    let bad = |what: String| Failure::Invalid(format!("mistral.rs: message {i}: {what}"));
    let role = string_field(m, "role").ok_or_else(|| bad("no string `role`".into()))?;
    let tool_calls = m.get_attr("tool_calls").ok().filter(|v| !v.is_none() && !v.is_undefined());
    let content = match m.get_attr("content") {
        Ok(v) if v.kind() == ValueKind::String => v,
        Ok(v) if v.is_none() || v.is_undefined() => {
            if tool_calls.is_none() {
                return Err(bad("No content was provided, expected tool calls to be provided.".into()));
            }
            Value::from("")
        }
        _ => return Err(bad("portkit's mistral.rs environment passes text content only".into())),
    };
    let mut out: Vec<(String, Value)> = vec![("role".into(), Value::from(role)), ("content".into(), content)];
    if let Some(r) = string_field(m, "reasoning_content") {
        out.push(("reasoning_content".into(), Value::from(r)));
    }
    if let Some(calls) = tool_calls {
        let mut rebuilt = Vec::new();
        for call in calls.try_iter().map_err(|e| bad(format!("tool_calls: {e}")))? {
            let function = call.get_attr("function").unwrap_or(Value::UNDEFINED);
            let name = string_field(&function, "name").ok_or_else(|| bad("a tool call without a function name".into()))?;
            let id = string_field(&call, "id").unwrap_or_else(|| name.clone());
            let mut arguments = function.get_attr("arguments").unwrap_or(Value::UNDEFINED);
            if let Some(text) = arguments.as_str() {
                if let Ok(parsed) = serde_json::from_str::<Value>(text) {
                    if parsed.kind() == ValueKind::Map {
                        arguments = parsed;
                    }
                }
            }
            let function = Value::from_iter([("name", Value::from(name)), ("arguments", arguments)]);
            rebuilt.push(Value::from_iter([("id", Value::from(id)), ("type", Value::from("function")), ("function", function)]));
        }
        out.push(("tool_calls".into(), Value::from(rebuilt)));
    }
    for key in ["tool_call_id", "name"] {
        if let Some(v) = string_field(m, key) {
            out.push((key.into(), Value::from(v)));
        }
    }
    Ok(Value::from_iter(out))
}

/// Schema keys most templates were trained on first, the rest alphabetical (chat_template.rs:526-528).
const TOOL_PARAMETER_ORDER: [&str; 4] = ["type", "properties", "required", "additionalProperties"];

/// One tool as `tool_template_value` passes it (chat_template.rs:530-563).
fn mistral_tool(i: usize, tool: &Value) -> Outcome<Value> {
    let function = tool.get_attr("function").unwrap_or(Value::UNDEFINED);
    let name = string_field(&function, "name").ok_or_else(|| Failure::Invalid(format!("mistral.rs: tool {i} has no function name")))?;
    let mut f: Vec<(String, Value)> = vec![("name".into(), Value::from(name))];
    if let Some(d) = string_field(&function, "description") {
        f.push(("description".into(), Value::from(d)));
    }
    let params = function.get_attr("parameters").unwrap_or(Value::UNDEFINED);
    if params.kind() == ValueKind::Map {
        let mut keys: Vec<String> = params.try_iter().map(|it| it.filter_map(|k| k.as_str().map(str::to_string)).collect()).unwrap_or_default();
        keys.sort_by(|a, b| {
            let rank = |k: &str| TOOL_PARAMETER_ORDER.iter().position(|x| *x == k).unwrap_or(TOOL_PARAMETER_ORDER.len());
            (rank(a), a.as_str()).cmp(&(rank(b), b.as_str()))
        });
        let ordered: Vec<(String, Value)> = keys.into_iter().map(|k| (k.clone(), params.get_attr(&k).unwrap_or(Value::UNDEFINED))).collect();
        f.push(("parameters".into(), Value::from_iter(ordered)));
    }
    if let Ok(strict) = function.get_attr("strict") {
        if strict.kind() == ValueKind::Bool {
            f.push(("strict".into(), strict));
        }
    }
    let tp = string_field(tool, "type").unwrap_or_else(|| "function".into());
    Ok(Value::from_iter([("type", Value::from(tp)), ("function", Value::from_iter(f))]))
}

/// Python's `json.dumps` separators without an indent: ", " between items, ": " after a key.
struct PythonSeparators;

impl serde_json::ser::Formatter for PythonSeparators {
    fn begin_array_value<W: std::io::Write + ?Sized>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_key<W: std::io::Write + ?Sized>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        if first {
            Ok(())
        } else {
            w.write_all(b", ")
        }
    }

    fn begin_object_value<W: std::io::Write + ?Sized>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}

/// mistral.rs's `tojson` (chat_template.rs:358-394): `indent` (at most 256) or Python's compact
/// separators; no HTML escaping; every other keyword argument is accepted and ignored.
fn mistral_tojson(value: Value, kwargs: Kwargs) -> Result<Value, Error> {
    use serde::Serialize;
    let mut buf = Vec::new();
    let written = if let Ok(indent) = kwargs.get::<usize>("indent") {
        if indent > 256 {
            return Err(Error::new(ErrorKind::InvalidOperation, format!("tojson `indent` of {indent} exceeds the maximum of 256")));
        }
        let pad = b" ".repeat(indent);
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, serde_json::ser::PrettyFormatter::with_indent(&pad));
        value.serialize(&mut ser)
    } else {
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonSeparators);
        value.serialize(&mut ser)
    };
    written.map_err(|e| Error::new(ErrorKind::InvalidOperation, "cannot serialize to JSON").with_source(e))?;
    let text = String::from_utf8(buf).map_err(|e| Error::new(ErrorKind::InvalidOperation, "cannot serialize to JSON").with_source(e))?;
    Ok(Value::from_safe_string(text))
}

/// mistral.rs's `strftime_now`: chrono's strftime of the UTC clock (chat_template.rs:430-434).
fn mistral_strftime_now(format: String) -> Result<String, Error> {
    Ok(chrono::Utc::now().format(&format).to_string())
}

/// The tools mistral.rs knows as built in (chat_template.rs:821-839).
const BUILTIN_TOOLS: [&str; 6] = ["browser", "python", "code_interpreter", "web_search", "brave_search", "wolfram_alpha"];

fn mistral_rs(template: &str, request: &Request, switches: Switches) -> Outcome<String> {
    if let Some(what) = preprocessed_by_mistral_rs(template) {
        return Err(Failure::NotImplemented(format!(
            "mistral.rs rewrites the messages of a {what} before rendering (chat_template.rs:765-771); portkit's mistral.rs environment does not reproduce that"
        )));
    }
    let messages = messages_of(request)?.iter().enumerate().map(|(i, m)| mistral_message(i, m)).collect::<Outcome<Vec<_>>>()?;
    let tools: Vec<Value> = match &request.tools {
        Some(t) if !t.is_none() => t
            .try_iter()
            .map_err(|e| Failure::Invalid(format!("chat request: tools: {e}")))?
            .enumerate()
            .map(|(i, tool)| mistral_tool(i, &tool))
            .collect::<Outcome<_>>()?,
        _ => Vec::new(),
    };
    let mut env = Environment::new();
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.set_lstrip_blocks(true);
    env.set_trim_blocks(true);
    switches.apply(&mut env);
    let source = mistral_rs_rewrites(template);
    env.add_template("chat_template", &source).map_err(|e| Failure::Template(e.to_string()))?;
    env.add_function("raise_exception", raise_exception);
    env.add_filter("tojson", mistral_tojson);
    env.add_function("strftime_now", mistral_strftime_now);
    let tmpl = env.get_template("chat_template").map_err(|e| Failure::Template(e.to_string()))?;
    let date_string = chrono::Utc::now().format("%d, %B, %Y").to_string();
    // neither enable_thinking nor a reasoning effort is asked for: thinking on, effort undefined
    // (request.rs:146, 167-185)
    let enable_thinking = true;
    let effort = Value::UNDEFINED;
    let base = context! {
        messages => messages,
        add_generation_prompt => request.add_generation_prompt,
        bos_token => request.bos_token,
        eos_token => request.eos_token,
        unk_token => request.unk_token,
        date_string => date_string,
        enable_thinking => enable_thinking,
        reasoning_effort => &effort,
        reasoning_strength => &effort,
    };
    let rendered = if tools.is_empty() {
        tmpl.render(base)
    } else {
        let builtin: Vec<String> = tools
            .iter()
            .filter_map(|t| t.get_attr("function").ok().and_then(|f| string_field(&f, "name")))
            .filter(|n| BUILTIN_TOOLS.contains(&n.as_str()))
            .collect();
        tmpl.render(context! { xml_tools => tools.clone(), tools => tools, builtin_tools => builtin, ..base })
    };
    rendered.map_err(|e| Failure::Template(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: &str, agp: bool) -> String {
        format!(r#"{{"messages": {messages}, "add_generation_prompt": {agp}, "bos_token": "<s>", "eos_token": "</s>"}}"#)
    }

    const ONE: &str = r#"[{"role": "user", "content": "Hi"}]"#;

    fn both(template: &str, request: &str) -> (Outcome<String>, Outcome<String>) {
        (
            render(Renderer::CandleExamples, template, request, Switches::default()),
            render(Renderer::MistralRs, template, request, Switches::default()),
        )
    }

    #[test]
    fn keys_name_the_environments() {
        assert_eq!(Renderer::from_key("mistral.rs").unwrap(), Renderer::MistralRs);
        assert_eq!(Renderer::CandleExamples.key(), "candle-examples");
        assert!(matches!(Renderer::from_key("jinja2"), Err(Failure::Invalid(_))));
    }

    #[test]
    fn trim_and_lstrip_only_in_mistral_rs() {
        let t = "{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content }}]\n  {% endif %}\n{% endfor %}";
        let (c, m) = both(t, &req(ONE, false));
        assert_eq!(m.unwrap(), "[Hi]\n");
        // no trim_blocks or lstrip_blocks, then trim_start (chat_template.rs:353)
        assert_eq!(c.unwrap(), "[Hi]\n  \n");
        let on = Switches { trim_blocks: Some(true), lstrip_blocks: Some(true) };
        assert_eq!(render(Renderer::CandleExamples, t, &req(ONE, false), on).unwrap(), "[Hi]\n");
    }

    #[test]
    fn python_methods_need_pycompat() {
        let t = "{{ messages[0].content.strip().upper() }}";
        let (c, m) = both(t, &req(r#"[{"role": "user", "content": "  hi "}]"#, false));
        assert_eq!(m.unwrap(), "HI");
        let e = c.unwrap_err().to_string();
        assert!(e.starts_with("Render error: unknown method: string has no method named strip (in chat:1)"), "{e}");
        // outside pycompat's list: both refuse
        let (c, m) = both("{{ messages[0].content.zfill(5) }}", &req(ONE, false));
        assert!(c.unwrap_err().to_string().contains("has no method named zfill"));
        assert!(m.unwrap_err().to_string().contains("has no method named zfill"));
    }

    #[test]
    fn generation_tags_and_loop_controls() {
        let t = "{% for m in messages %}{% generation %}{{ m.content }}{% endgeneration %}{% endfor %}";
        let (c, m) = both(t, &req(ONE, false));
        assert_eq!(m.unwrap(), "Hi");
        assert!(c.unwrap_err().to_string().starts_with("Template error: syntax error: unknown statement generation"));
        let t = "{% for m in messages %}{{ m.content }}{% break %}{% endfor %}";
        let (c, m) = both(t, &req(ONE, false));
        assert!(c.unwrap_err().to_string().contains("unknown statement break"));
        assert!(m.unwrap_err().to_string().contains("unknown statement break"));
    }

    #[test]
    fn descending_range_is_rewritten_one_short() {
        let t = "{% for i in range(messages|length, -1, -1) %}{{ i }}{% endfor %}";
        let (c, m) = both(t, &req(r#"[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]"#, false));
        assert_eq!(c.unwrap(), "210");
        assert_eq!(m.unwrap(), "10");
        assert_eq!(mistral_rs_rewrites("{{ messages[::-1] }}"), "{{ messages|reverse }}");
    }

    #[test]
    fn tojson_per_environment() {
        let t = "{{ messages[0] | tojson }}|{{ messages[0] | tojson(sort_keys=true) }}";
        let (c, m) = both(t, &req(ONE, false));
        assert!(c.unwrap_err().to_string().contains("unknown filter"), "no `json` feature in candle-examples");
        assert_eq!(m.unwrap(), r#"{"role": "user", "content": "Hi"}|{"role": "user", "content": "Hi"}"#);
        let (_, m) = both("{{ messages | tojson(indent=2) }}", &req(ONE, false));
        assert_eq!(m.unwrap(), "[\n  {\n    \"role\": \"user\",\n    \"content\": \"Hi\"\n  }\n]");
    }

    #[test]
    fn strftime_now_and_the_context() {
        let (c, m) = both("{{ strftime_now('%Y') | length }}", &req(ONE, false));
        assert!(c.unwrap_err().to_string().contains("strftime_now is unknown"));
        assert_eq!(m.unwrap(), "4");
        let t = "{{ bos_token }}|{{ unk_token }}|{{ enable_thinking }}|{{ date_string is defined }}";
        let (c, m) = both(t, &req(ONE, false));
        assert_eq!(c.unwrap(), "<s>||false|false");
        assert_eq!(m.unwrap(), "<s>|none|true|true");
    }

    #[test]
    fn messages_as_each_program_passes_them() {
        let msgs = r#"[{"role": "user", "content": "Hi"},
            {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]},
            {"role": "assistant", "content": "ok", "tool_calls": null}]"#;
        let t = "{% for m in messages %}{% for k in m %}{{ k }},{% endfor %};{% endfor %}{{ messages[1].tool_calls[0].id }}{{ messages[1].tool_calls[0].function.arguments.x }}";
        let m = render(Renderer::MistralRs, t, &req(msgs, false), Switches::default()).unwrap();
        assert_eq!(m, "role,content,;role,content,tool_calls,;role,content,;f1");
        // candle-examples' `Message` has role and content strings only, iterated in key order
        let e = render(Renderer::CandleExamples, t, &req(msgs, false), Switches::default()).unwrap_err();
        assert!(matches!(e, Failure::Invalid(ref s) if s.contains("message 1 has `tool_calls`")), "{e:?}");
        let e = render(Renderer::CandleExamples, t, &req(r#"[{"role": "user", "content": null}]"#, false), Switches::default()).unwrap_err();
        assert!(matches!(e, Failure::Invalid(ref s) if s.contains("message 0 has no string `content`")), "{e:?}");
        let ok = r#"[{"role": "user", "content": "Hi", "name": null}]"#;
        assert_eq!(render(Renderer::CandleExamples, "{% for k in messages[0] %}{{ k }},{% endfor %}", &req(ok, false), Switches::default()).unwrap(), "content,role,");
        let tools = r#"{"messages": [{"role": "user", "content": "Hi"}], "tools": [{"type": "function", "function": {"name": "f"}}]}"#;
        assert!(matches!(render(Renderer::CandleExamples, "x", tools, Switches::default()), Err(Failure::Invalid(ref s)) if s.contains("no `tools`")));
        let m = render(Renderer::MistralRs, "{{ tools | tojson }}|{{ builtin_tools }}", tools, Switches::default()).unwrap();
        assert_eq!(m, r#"[{"type": "function", "function": {"name": "f"}}]|[]"#);
    }

    #[test]
    fn refusals_keep_minijinja_text() {
        let (c, m) = both("{{ raise_exception('no system role') }}", &req(ONE, false));
        assert_eq!(c.unwrap_err().to_string(), "Render error: invalid operation: no system role (in chat:1)");
        assert_eq!(m.unwrap_err().to_string(), "invalid operation: no system role (in chat_template:1)");
        let e = render(Renderer::MistralRs, "<|tool_call>x<tool_call|>", &req(ONE, false), Switches::default()).unwrap_err();
        assert!(matches!(e, Failure::NotImplemented(_)));
        assert!(matches!(render(Renderer::MistralRs, "x", "{}", Switches::default()), Err(Failure::Invalid(_))));
    }
}
