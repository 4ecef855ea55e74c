//! Reads candle's own `Debug` text of a parsed config (`Config { a: 1, b: Silu, c: None, d: Some(4) }`)
//! into JSON. mixtral's and stable_lm's fields are `pub(crate)` and starcoder2's are private, so
//! this text is the only view of what serde put in them that does not re-declare candle's struct.

use candle_nn::Activation;
use serde_json::{json, Map, Number, Value};

/// The JSON name of an activation: the spelling transformers writes where candle's serde has an
/// alias for it (`gelu`, `gelu_new`, `gelu_pytorch_tanh`), otherwise candle's serde name.
pub fn activation_name(act: &Activation) -> Value {
    match act {
        Activation::Gelu => json!("gelu"),
        Activation::NewGelu => json!("gelu_new"),
        Activation::GeluPytorchTanh => json!("gelu_pytorch_tanh"),
        other => serde_json::to_value(other).unwrap_or_else(|_| json!(format!("{other:?}"))),
    }
}

/// Parses the Debug text of a struct whose fields are numbers, bools, strings, `Option`s, `Vec`s
/// and enums (candle `Activation`s, read back through its serde, or any other unit variant, by
/// its lowercase name) into a JSON object.
pub fn parse(text: &str) -> Result<Map<String, Value>, String> {
    let mut p = Parser { s: text.as_bytes(), i: 0 };
    match p.value()? {
        Value::Object(m) => {
            p.ws();
            if p.i != p.s.len() {
                return Err(format!("trailing text at {} in `{text}`", p.i));
            }
            Ok(m)
        }
        other => Err(format!("expected a struct, got {other}")),
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.i < self.s.len() && self.s[self.i] == c {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: u8) -> Result<(), String> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(format!("expected `{}` at {}", c as char, self.i))
        }
    }

    fn ident(&mut self) -> String {
        self.ws();
        let start = self.i;
        while self.i < self.s.len() && (self.s[self.i].is_ascii_alphanumeric() || self.s[self.i] == b'_') {
            self.i += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    /// A `String`'s Debug text: quoted, with `\\`, `\"`, `\n`, `\t`, `\r`, `\0`, `\'` and `\u{..}` escapes.
    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // the opening quote
        let mut out = String::new();
        let rest = std::str::from_utf8(&self.s[self.i..]).map_err(|e| e.to_string())?;
        let mut chars = rest.char_indices();
        while let Some((k, ch)) = chars.next() {
            match ch {
                '"' => {
                    self.i += k + 1;
                    return Ok(out);
                }
                '\\' => match chars.next().map(|(_, e)| e) {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('r') => out.push('\r'),
                    Some('0') => out.push('\0'),
                    Some('u') => {
                        let hex: String = chars.by_ref().map(|(_, h)| h).skip_while(|&h| h == '{').take_while(|&h| h != '}').collect();
                        let code = u32::from_str_radix(&hex, 16).map_err(|_| format!("bad escape `\\u{{{hex}}}`"))?;
                        out.push(char::from_u32(code).ok_or_else(|| format!("bad char `{hex}`"))?);
                    }
                    Some(e) => out.push(e), // `\\`, `\"`, `\'`
                    None => break,
                },
                other => out.push(other),
            }
        }
        Err("unterminated string".to_string())
    }

    fn value(&mut self) -> Result<Value, String> {
        self.ws();
        let c = *self.s.get(self.i).ok_or("unexpected end")?;
        if c == b'[' {
            self.i += 1;
            let mut items = Vec::new();
            while !self.eat(b']') {
                items.push(self.value()?);
                self.eat(b',');
            }
            return Ok(Value::Array(items));
        }
        if c == b'"' {
            return self.string().map(Value::String);
        }
        if self.s[self.i..].starts_with(b"-inf") {
            // a non-finite float, as serde_json writes one: null
            self.i += 4;
            return Ok(Value::Null);
        }
        if c == b'-' || c.is_ascii_digit() {
            let start = self.i;
            self.i += 1;
            while self.i < self.s.len() && matches!(self.s[self.i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'-' | b'+') {
                self.i += 1;
            }
            let t = std::str::from_utf8(&self.s[start..self.i]).map_err(|e| e.to_string())?;
            return number(t);
        }
        let name = self.ident();
        if name.is_empty() {
            return Err(format!("unexpected `{}` at {}", c as char, self.i));
        }
        match name.as_str() {
            "true" => return Ok(Value::Bool(true)),
            "false" => return Ok(Value::Bool(false)),
            "None" => return Ok(Value::Null),
            // a non-finite float (`f32::INFINITY`'s Debug text): null, as serde_json writes it
            "inf" | "NaN" => return Ok(Value::Null),
            _ => {}
        }
        if self.eat(b'{') {
            let mut m = Map::new();
            while !self.eat(b'}') {
                let key = self.ident();
                self.expect(b':')?;
                m.insert(key, self.value()?);
                self.eat(b',');
            }
            return Ok(Value::Object(m));
        }
        let arg = if self.eat(b'(') {
            let v = self.value()?;
            self.expect(b')')?;
            Some(v)
        } else {
            None
        };
        if name == "Some" {
            return arg.ok_or_else(|| "Some without a value".to_string());
        }
        // An enum variant: read it back through candle's own `Activation` serde (lowercase names,
        // externally tagged for `Elu(alpha)`), so the name is the one candle parses.
        let tagged = match arg {
            None => Value::String(name.to_lowercase()),
            Some(v) => Value::Object(Map::from_iter([(name.to_lowercase(), v)])),
        };
        match serde_json::from_value::<Activation>(tagged.clone()) {
            Ok(act) => Ok(activation_name(&act)),
            Err(_) => Ok(tagged),
        }
    }
}

fn number(t: &str) -> Result<Value, String> {
    if let Ok(u) = t.parse::<u64>() {
        return Ok(Value::Number(u.into()));
    }
    if let Ok(i) = t.parse::<i64>() {
        return Ok(Value::Number(i.into()));
    }
    let f: f64 = t.parse().map_err(|_| format!("bad number `{t}`"))?;
    Number::from_f64(f).map(Value::Number).ok_or_else(|| format!("non-finite number `{t}`"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flat_struct_with_options_and_activations() {
        let m = parse("Config { a: 1, b: Silu, c: None, d: Some(4), e: 1e-5, f: 10000.0, g: true, h: GeluPytorchTanh, i: Elu(1.0), j: [1.0, 2.5] }").unwrap();
        assert_eq!(
            Value::Object(m),
            json!({"a": 1, "b": "silu", "c": null, "d": 4, "e": 1e-5, "f": 10000.0, "g": true,
                   "h": "gelu_pytorch_tanh", "i": {"elu": 1.0}, "j": [1.0, 2.5]})
        );
    }

    #[test]
    fn strings_with_escapes() {
        let s = "say \"hi\"\n\u{1}é\\";
        let m = parse(&format!("C {{ a: Some({:?}), b: {:?} }}", "bert", s)).unwrap();
        assert_eq!(Value::Object(m), json!({"a": "bert", "b": s}));
    }

    #[test]
    fn non_finite_floats_are_null_as_serde_json_writes_them() {
        let m = parse(&format!("C {{ a: {:?}, b: {:?}, c: {:?}, d: -1.5 }}", f32::INFINITY, f32::NEG_INFINITY, f64::NAN)).unwrap();
        assert_eq!(Value::Object(m), json!({"a": null, "b": null, "c": null, "d": -1.5}));
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(parse("Config { a: ").is_err());
        assert!(parse("[1, 2]").is_err());
    }
}
