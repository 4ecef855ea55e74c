//! The two ways candle can fail, kept apart so Python callers (and `portkit verify`) can tell
//! a returned `Err` from a panic, and catching panics so the host process survives them.

use std::cell::RefCell;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// serde refused the config JSON: serde_json's message, unchanged.
    Config(String),
    /// candle returned `Err`: its Display text, unchanged.
    Candle(String),
    /// candle panicked (for example `Llama::load` unwraps each block): location and message.
    Panic(String),
    /// A device that this build does not include, with how to build it.
    DeviceUnavailable(String),
    /// Bad arguments from the caller (unknown dtype, empty prompt, ...).
    Invalid(String),
    /// A weight or GGUF file that does not exist.
    NotFound(String),
    /// Something portkit_native does not offer for this family (e.g. per-layer capture).
    NotImplemented(String),
    /// The `tokenizers` crate refused a tokenizer.json or an encode: its Display text, unchanged.
    Tokenizer(String),
    /// A chat-template environment (src/chat_template.rs) refused the template: the program's text, unchanged.
    Template(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Config(m)
            | Failure::Candle(m)
            | Failure::Panic(m)
            | Failure::DeviceUnavailable(m)
            | Failure::Invalid(m)
            | Failure::NotFound(m)
            | Failure::NotImplemented(m)
            | Failure::Tokenizer(m)
            | Failure::Template(m) => f.write_str(m),
        }
    }
}

impl From<candle_core::Error> for Failure {
    fn from(e: candle_core::Error) -> Self {
        Failure::Candle(message(&e))
    }
}

/// candle's Display text without the backtrace that `Error::bt()` attaches when
/// RUST_BACKTRACE is set: the message users search for, not hundreds of frame lines.
pub fn message(e: &candle_core::Error) -> String {
    use candle_core::Error;
    match e {
        Error::WithBacktrace { inner, .. } => message(inner),
        Error::WithPath { inner, path } => format!("path: {path:?} {}", message(inner)),
        Error::Context { inner, context } => format!("{context}\n{}", message(inner)),
        other => other.to_string(),
    }
}

pub type Outcome<T> = std::result::Result<T, Failure>;

thread_local! {
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
    /// How many `guarded` calls are active on this thread; panics elsewhere keep the default hook.
    static GUARD_DEPTH: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

static HOOK: Once = Once::new();

/// Wraps the default hook: inside `guarded`, a panic is recorded as
/// "panicked at FILE:LINE:COL: MESSAGE" for the thread (so the text reaches Python) instead of
/// being printed; anywhere else the previous hook runs unchanged.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            let message = without_frames(&payload_text(info.payload()));
            let text = match info.location() {
                Some(loc) => format!("panicked at {}:{}:{}: {message}", loc.file(), loc.line(), loc.column()),
                None => format!("panicked: {message}"),
            };
            if GUARD_DEPTH.with(|d| d.get()) > 0 {
                LAST_PANIC.with(|slot| *slot.borrow_mut() = Some(text));
            } else {
                previous(info);
            }
        }));
    });
}

/// A panic from `.unwrap()` on a candle `Err` formats the error with `{:?}`, which includes the
/// backtrace frames ("\n   0: candle_core::error::Error::bt ...") under RUST_BACKTRACE: drop them.
fn without_frames(text: &str) -> String {
    let mut out = text;
    if let Some(i) = text.find("\n") {
        let rest = text[i + 1..].trim_start();
        if rest.starts_with("0: ") {
            out = &text[..i];
        }
    }
    out.to_string()
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_string()
    }
}

/// Runs `f`, turning a candle `Err` into `Failure::Candle` and a panic into `Failure::Panic`.
pub fn guarded<T>(f: impl FnOnce() -> Outcome<T>) -> Outcome<T> {
    install_hook();
    LAST_PANIC.with(|slot| slot.borrow_mut().take());
    GUARD_DEPTH.with(|d| d.set(d.get() + 1));
    let caught = panic::catch_unwind(AssertUnwindSafe(f));
    GUARD_DEPTH.with(|d| d.set(d.get() - 1));
    match caught {
        Ok(outcome) => outcome,
        Err(payload) => {
            let text = LAST_PANIC
                .with(|slot| slot.borrow_mut().take())
                .unwrap_or_else(|| format!("panicked: {}", payload_text(payload.as_ref())));
            Err(Failure::Panic(text))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panic_becomes_failure_with_location() {
        let out: Outcome<()> = guarded(|| panic!("boom {}", 7));
        match out {
            Err(Failure::Panic(text)) => {
                assert!(text.contains("boom 7"), "{text}");
                assert!(text.contains("failure.rs:"), "{text}");
            }
            other => panic!("expected a panic failure, got {other:?}"),
        }
    }

    #[test]
    fn panic_text_loses_backtrace_frames() {
        let t = "called `Result::unwrap()` on an `Err` value: cannot find tensor x\n   0: candle_core::error::Error::bt\n   1: y";
        assert_eq!(without_frames(t), "called `Result::unwrap()` on an `Err` value: cannot find tensor x");
        assert_eq!(without_frames("two\nlines"), "two\nlines");
    }

    #[test]
    fn backtrace_is_not_part_of_the_message() {
        let e = candle_core::Error::Msg("shape mismatch".into()).with_path("/m.gguf");
        let e = candle_core::Error::WithBacktrace {
            inner: Box::new(e),
            backtrace: Box::new(std::backtrace::Backtrace::force_capture()),
        };
        assert_eq!(Failure::from(e), Failure::Candle("path: \"/m.gguf\" shape mismatch".into()));
    }

    #[test]
    fn candle_error_keeps_its_text() {
        let out: Outcome<()> = guarded(|| Err(candle_core::Error::Msg("plain text".into()).into()));
        assert_eq!(out, Err(Failure::Candle("plain text".into())));
    }
}
