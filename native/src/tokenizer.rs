//! The tokenizer a candle program feeds its model from: the Rust `tokenizers` crate at the
//! version the built candle-core resolves (the wheel: 0.23.2, feature `fancy-regex`, candle 0.11.1's; older
//! releases' builds pin theirs, portkit/verify/candle/release_build.py), reading tokenizer.json
//! literally, as `Tokenizer::from_file(path)?.encode(text, add_special_tokens)` does in candle's
//! examples. Nothing here reads tokenizer_config.json: the crate never does.

use crate::failure::{guarded, Failure, Outcome};
use std::path::Path;
use tokenizers::Tokenizer;

/// What one `encode` gives a candle program: `Encoding::get_ids()` (padding included, when the
/// file saves one) and the token strings beside them.
#[derive(Debug, Clone, PartialEq)]
pub struct Encoded {
    pub ids: Vec<u32>,
    pub tokens: Vec<String>,
}

pub struct CrateTokenizer {
    inner: Tokenizer,
}

/// The crate's error as its Display prints it (serde_json's text keeps its "at line L column C").
fn crate_error(e: tokenizers::Error) -> Failure {
    Failure::Tokenizer(e.to_string())
}

impl CrateTokenizer {
    /// `Tokenizer::from_file`: a missing file is `NotFound` (the io error's text after the path),
    /// every other refusal `Failure::Tokenizer` with the crate's message unchanged.
    pub fn from_file(path: &Path) -> Outcome<Self> {
        guarded(|| match Tokenizer::from_file(path) {
            Ok(inner) => Ok(Self { inner }),
            Err(e) => match e.downcast_ref::<std::io::Error>() {
                Some(io) if io.kind() == std::io::ErrorKind::NotFound => Err(Failure::NotFound(format!("{}: {io}", path.display()))),
                _ => Err(crate_error(e)),
            },
        })
    }

    /// `Tokenizer::from_str` on the text of a tokenizer.json (an edited copy, for one).
    pub fn from_json(json: &str) -> Outcome<Self> {
        guarded(|| json.parse::<Tokenizer>().map(|inner| Self { inner }).map_err(crate_error))
    }

    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Outcome<Encoded> {
        guarded(|| {
            let enc = self.inner.encode(text, add_special_tokens).map_err(crate_error)?;
            Ok(Encoded { ids: enc.get_ids().to_vec(), tokens: enc.get_tokens().to_vec() })
        })
    }

    pub fn decode(&self, ids: &[u32], skip_special_tokens: bool) -> Outcome<String> {
        guarded(|| self.inner.decode(ids, skip_special_tokens).map_err(crate_error))
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id)
    }

    pub fn vocab_size(&self, with_added_tokens: bool) -> usize {
        self.inner.get_vocab_size(with_added_tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A BPE over "a", "b", "ab" with a `<s>` added token and a template that prepends it.
    fn tiny(merges: &str, model_type: &str) -> String {
        format!(
            r#"{{"version":"1.0","truncation":null,"padding":null,
            "added_tokens":[{{"id":0,"content":"<s>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}}],
            "normalizer":null,"pre_tokenizer":null,
            "post_processor":{{"type":"TemplateProcessing","single":[{{"SpecialToken":{{"id":"<s>","type_id":0}}}},{{"Sequence":{{"id":"A","type_id":0}}}}],
              "pair":[{{"Sequence":{{"id":"A","type_id":0}}}}],"special_tokens":{{"<s>":{{"id":"<s>","ids":[0],"tokens":["<s>"]}}}}}},
            "decoder":null,
            "model":{{"type":"{model_type}","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,
              "fuse_unk":false,"byte_fallback":false,"ignore_merges":false,"vocab":{{"<s>":0,"a":1,"b":2,"ab":3}},"merges":{merges}}}}}"#
        )
    }

    #[test]
    fn encodes_with_and_without_special_tokens() {
        let t = CrateTokenizer::from_json(&tiny(r#"["a b"]"#, "BPE")).unwrap();
        assert_eq!(t.encode("abab", true).unwrap(), Encoded { ids: vec![0, 3, 3], tokens: vec!["<s>".into(), "ab".into(), "ab".into()] });
        assert_eq!(t.encode("abab", false).unwrap().ids, vec![3, 3]);
        assert_eq!(t.encode("a<s>b", false).unwrap().ids, vec![1, 0, 2]);
        assert_eq!(t.decode(&[0, 3, 1], false).unwrap(), "<s> ab a");
        assert_eq!(t.decode(&[0, 3, 1], true).unwrap(), "ab a");
        assert_eq!((t.token_to_id("ab"), t.id_to_token(2), t.vocab_size(true)), (Some(3), Some("b".into()), 4));
    }

    #[test]
    fn bad_merges_keep_the_crates_message() {
        let e = CrateTokenizer::from_json(&tiny(r#"["a b", "   "]"#, "BPE")).err().unwrap();
        match e {
            Failure::Tokenizer(m) => assert!(m.starts_with("Merges text file invalid at line 2 at line "), "{m}"),
            other => panic!("{other:?}"),
        }
        let e = CrateTokenizer::from_json(&tiny(r#"["a c"]"#, "BPE")).err().unwrap();
        assert!(e.to_string().starts_with("Token `c` out of vocabulary at line "), "{e}");
    }

    #[test]
    fn unknown_model_type_is_the_crates_message() {
        let e = CrateTokenizer::from_json(&tiny(r#"["a b"]"#, "Bogus")).err().unwrap();
        // An unknown `type` falls through to the crate's untagged (pre-"type") model formats.
        assert!(matches!(e, Failure::Tokenizer(_)), "{e:?}");
        assert!(e.to_string().starts_with("data did not match any variant of untagged enum ModelUntagged at line "), "{e}");
    }

    #[test]
    fn missing_file_is_not_found() {
        let e = CrateTokenizer::from_file(Path::new("/nonexistent/tokenizer.json")).err().unwrap();
        assert!(matches!(e, Failure::NotFound(ref m) if m.starts_with("/nonexistent/tokenizer.json: ")), "{e:?}");
    }
}
