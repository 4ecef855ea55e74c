//! docs/porting.md's Rust snippet, compiled into this port: the block after the line
//! `<!-- compiled by tests/hand_port -->` becomes $OUT_DIR/porting_snippet.rs.

use std::path::Path;

const MARKER: &str = "<!-- compiled by tests/hand_port -->";

fn main() {
    // read at run time, not `env!`: cargo reuses a compiled build script across clones in other
    // directories (its hash leaves the absolute path out), and a baked-in path names the old clone
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    let docs = Path::new(&manifest).join("../../docs/porting.md");
    println!("cargo:rerun-if-changed={}", docs.display());
    let text = std::fs::read_to_string(&docs).unwrap_or_else(|e| panic!("{}: {e}", docs.display()));
    let (_, after) = text.split_once(MARKER).unwrap_or_else(|| panic!("{}: no line {MARKER:?}", docs.display()));
    let body = after
        .trim_start()
        .strip_prefix("```rust\n")
        .unwrap_or_else(|| panic!("{}: {MARKER:?} is not followed by a ```rust block", docs.display()));
    let (code, _) = body.split_once("\n```").unwrap_or_else(|| panic!("{}: the ```rust block after {MARKER:?} is not closed", docs.display()));
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("porting_snippet.rs");
    std::fs::write(out, code).unwrap();
}
