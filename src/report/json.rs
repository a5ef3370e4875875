//! A small JSON reader and writer for result files (no dependencies).
//!
//! Contract:
//! - [`parse`] reads a JSON object or array into a [`Value`], and also what perftest 4.5
//!   writes with `--out_json` (not JSON): bare keys (`t_min: 1.23,`), bare values
//!   (`Connection_type: RC,`: the text up to the next `,`, newline, `}` or `]`, trimmed; a
//!   number when it reads as one) and a trailing comma before `}` or `]`. It checks what the
//!   result files need, not every rule of RFC 8259: a malformed number reads as a string
//!   (which the result reader then refuses, naming the field), `\u` surrogate pairs are not
//!   read.
//! - Neither ever panics, whatever the input: malformed text, a truncated file, nesting deeper
//!   than [`MAX_DEPTH`] give a [`JsonError`] with the 1-based line and column where reading
//!   stopped.
//! - Objects keep their keys in file order ([`Value::Obj`] is a list of pairs); a repeated key
//!   is kept twice and [`Value::get`] returns the first.
//! - [`write_str`] / [`num`] write text that [`parse`] reads back to the same value: strings
//!   are escaped, finite numbers are written in Rust's shortest round-trip form, non-finite
//!   numbers (which JSON cannot hold) as `null`.

use std::fmt;

/// Deepest nesting of arrays and objects accepted (result files need 4).
pub const MAX_DEPTH: usize = 64;

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// A number.
    Num(f64),
    /// A string.
    Str(String),
    /// An array.
    Arr(Vec<Value>),
    /// An object, keys in file order.
    Obj(Vec<(String, Value)>),
}

impl Value {
    /// The first value of `key`, if this is an object that has it.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Obj(kv) => kv.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }
    /// The string, if this is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The number, if this is one.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Num(v) => Some(*v),
            _ => None,
        }
    }
    /// The number, if this is a whole number in `0..=2^53` (exact in an `f64`).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Num(v) if *v >= 0.0 && *v <= 9_007_199_254_740_992.0 && v.fract() == 0.0 => {
                Some(*v as u64)
            }
            _ => None,
        }
    }
    /// The kind of value, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Num(_) => "a number",
            Value::Str(_) => "a string",
            Value::Arr(_) => "an array",
            Value::Obj(_) => "an object",
        }
    }
    /// The value as compact JSON text.
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        self.write(&mut s);
        s
    }
    fn write(&self, out: &mut String) {
        match self {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Num(v) => out.push_str(&num(*v)),
            Value::Str(s) => write_str(out, s),
            Value::Arr(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    v.write(out);
                }
                out.push(']');
            }
            Value::Obj(kv) => {
                out.push('{');
                for (i, (k, v)) in kv.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_str(out, k);
                    out.push(':');
                    v.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// A JSON string literal for `s`: quotes, backslashes and control characters escaped.
pub fn string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    write_str(&mut o, s);
    o
}

/// Append `s` as a JSON string literal (see [`string`]).
pub fn write_str(out: &mut String, s: &str) {
    out.reserve(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A number as JSON text: the shortest form that reads back to the same `f64`; `null` for
/// NaN and infinities.
pub fn num(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "null".to_string()
    }
}

/// Where and why reading stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// Byte offset into the text.
    pub offset: usize,
    /// What was wrong.
    pub msg: String,
}

impl fmt::Display for JsonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}, column {}: {}", self.line, self.col, self.msg)
    }
}

impl std::error::Error for JsonError {}

/// Read a JSON document, or perftest 4.5's `--out_json` dialect (see the module doc): an
/// object or an array, then only white space.
pub fn parse(text: &str) -> Result<Value, JsonError> {
    let mut p = Parser {
        s: text,
        b: text.as_bytes(),
        i: 0,
        depth: 0,
    };
    p.ws();
    if !matches!(p.peek(), Some(b'{' | b'[')) {
        return Err(p.err(
            p.i,
            format!("{} where '{{' or '[' was expected", p.describe()),
        ));
    }
    let v = p.value()?;
    p.ws();
    if p.i < p.b.len() {
        return Err(p.err(
            p.i,
            format!("{} after the end of the document", p.describe()),
        ));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    depth: usize,
}

impl Parser<'_> {
    /// The file ended inside the `what` (object, array, string) opened at byte `open`.
    fn eof_inside(&self, what: &str, open: usize) -> JsonError {
        let opened = self.err(open, "");
        self.err(
            self.i,
            format!(
                "unexpected end of file inside the {what} opened at line {}, column {}",
                opened.line, opened.col
            ),
        )
    }

    fn err(&self, at: usize, msg: impl Into<String>) -> JsonError {
        let at = at.min(self.b.len());
        // `at` is always on a char boundary: the parser only stops at ASCII bytes or ends.
        let before = self.s.get(..at).unwrap_or(self.s);
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        JsonError {
            line,
            col,
            offset: at,
            msg: msg.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    fn describe(&self) -> String {
        match self.s.get(self.i..).and_then(|r| r.chars().next()) {
            None => "end of file".to_string(),
            Some(c) if c.is_control() => format!("character U+{:04X}", c as u32),
            Some(c) => format!("'{c}'"),
        }
    }

    fn value(&mut self) -> Result<Value, JsonError> {
        match self.peek() {
            None => Err(self.err(self.i, "unexpected end of file: a value was expected")),
            Some(b'{' | b'[') if self.depth >= MAX_DEPTH => {
                Err(self.err(self.i, format!("nested deeper than {MAX_DEPTH} levels")))
            }
            Some(open @ (b'{' | b'[')) => {
                self.depth += 1;
                let v = self.list(open == b'{');
                self.depth -= 1;
                v
            }
            Some(b'"') => self.string().map(Value::Str),
            Some(_) => self.bare_value(),
        }
    }

    /// An object (`{"key": value, ...}`, keys quoted or bare) or an array (`[value, ...]`),
    /// a trailing comma allowed.
    fn list(&mut self, object: bool) -> Result<Value, JsonError> {
        let (what, close) = if object {
            ("object", b'}')
        } else {
            ("array", b']')
        };
        let open = self.i;
        self.i += 1;
        let (mut kv, mut items) = (Vec::new(), Vec::new());
        loop {
            self.ws();
            match self.peek() {
                None => return Err(self.eof_inside(what, open)),
                Some(c) if c == close => {
                    self.i += 1;
                    return Ok(if object {
                        Value::Obj(kv)
                    } else {
                        Value::Arr(items)
                    });
                }
                _ => {}
            }
            if object {
                let key = match self.peek() {
                    Some(b'"') => self.string()?,
                    _ => self.bare_key()?,
                };
                self.ws();
                if self.peek() != Some(b':') {
                    return Err(self.err(
                        self.i,
                        format!(
                            "{} where ':' after key \"{key}\" was expected",
                            self.describe()
                        ),
                    ));
                }
                self.i += 1;
                self.ws();
                kv.push((key, self.value()?));
            } else {
                items.push(self.value()?);
            }
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(c) if c == close => {}
                None => return Err(self.eof_inside(what, open)),
                _ => {
                    return Err(self.err(
                        self.i,
                        format!(
                            "{} where ',' or '{}' was expected",
                            self.describe(),
                            close as char
                        ),
                    ))
                }
            }
        }
    }

    fn string(&mut self) -> Result<String, JsonError> {
        let open = self.i;
        self.i += 1;
        let mut out = String::new();
        loop {
            let start = self.i;
            while let Some(c) = self.peek() {
                if c == b'"' || c == b'\\' || c < 0x20 {
                    break;
                }
                self.i += 1;
            }
            // Stopped at an ASCII byte or the end: a char boundary.
            out.push_str(self.s.get(start..self.i).unwrap_or(""));
            match self.peek() {
                None => return Err(self.eof_inside("string", open)),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.i += 1;
                    let c = match self.peek() {
                        Some(b'"') => '"',
                        Some(b'\\') => '\\',
                        Some(b'/') => '/',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'n') => '\n',
                        Some(b'r') => '\r',
                        Some(b't') => '\t',
                        Some(b'u') => self.unicode_escape()?,
                        _ => {
                            return Err(self.err(
                                self.i,
                                format!("{} is not a string escape", self.describe()),
                            ))
                        }
                    };
                    self.i += 1;
                    out.push(c);
                }
                Some(_) => {
                    return Err(self.err(
                        self.i,
                        "control character inside a string (newlines must be written \\n)",
                    ))
                }
            }
        }
    }

    /// `\uXXXX` with `self.i` at the `u`, left at the last digit. Surrogate pairs are not
    /// read: result files are ASCII but for what a user typed into an option.
    fn unicode_escape(&mut self) -> Result<char, JsonError> {
        let hex = self
            .s
            .get(self.i + 1..self.i + 5)
            .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()));
        let c = hex
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.err(self.i, "\\u must be followed by 4 hex digits"))?;
        self.i += 4;
        char::from_u32(c).ok_or_else(|| {
            self.err(
                self.i,
                "a \\u escape of a UTF-16 surrogate is not read here",
            )
        })
    }

    /// A key without quotes (perftest 4.5): the text up to ':' (trimmed), on one line.
    fn bare_key(&mut self) -> Result<String, JsonError> {
        let start = self.i;
        while let Some(c) = self.peek() {
            if matches!(c, b':' | b'\n' | b'{' | b'}' | b'[' | b']' | b',' | b'"') {
                break;
            }
            self.i += 1;
        }
        if self.peek() != Some(b':') {
            return Err(self.err(
                self.i,
                format!("{} where ':' after a key was expected", self.describe()),
            ));
        }
        let k = self.s.get(start..self.i).unwrap_or("").trim();
        if k.is_empty() {
            return Err(self.err(start, "empty key"));
        }
        Ok(k.to_string())
    }

    /// A value that is not a string, object or array: the text up to ',', newline, '}' or
    /// ']' (trimmed). `true`, `false`, `null` and finite numbers are what they say; any other
    /// text is a string (perftest 4.5's bare values, `Connection_type: RC,`).
    fn bare_value(&mut self) -> Result<Value, JsonError> {
        let start = self.i;
        while let Some(c) = self.peek() {
            if matches!(c, b',' | b'\n' | b'}' | b']') {
                break;
            }
            self.i += 1;
        }
        let t = self.s.get(start..self.i).unwrap_or("").trim();
        Ok(match t {
            "" => {
                return Err(self.err(
                    start,
                    format!("{} where a value was expected", self.describe()),
                ))
            }
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            "null" => Value::Null,
            _ => match t.parse::<f64>() {
                Ok(v) if v.is_finite() && t.bytes().all(|c| b"+-.eE0123456789".contains(&c)) => {
                    Value::Num(v)
                }
                _ => Value::Str(t.to_string()),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        assert_eq!(string("a\u{1}\\"), "\"a\\u0001\\\\\"");
        assert_eq!(string("say \"x\"\n\t"), "\"say \\\"x\\\"\\n\\t\"");
    }

    #[test]
    fn values_and_escapes() {
        let v =
            parse(r#" {"a": [1, -2.5e3, true, false, null], "s": "q\"\\\/\n\u00e9😀", "e": {}} "#)
                .unwrap();
        assert_eq!(
            v.get("a"),
            Some(&Value::Arr(vec![
                Value::Num(1.0),
                Value::Num(-2500.0),
                Value::Bool(true),
                Value::Bool(false),
                Value::Null
            ]))
        );
        assert_eq!(v.get("s").and_then(Value::as_str), Some("q\"\\/\né😀"));
        assert_eq!(v.get("e"), Some(&Value::Obj(vec![])));
    }

    #[test]
    fn writer_round_trips() {
        let v = Value::Obj(vec![
            (
                "k\"ey\u{1}".into(),
                Value::Str("tab\there\\ \u{7f} µs".into()),
            ),
            (
                "n".into(),
                Value::Arr(vec![
                    Value::Num(0.1),
                    Value::Num(1e-7),
                    Value::Num(123456789.125),
                    Value::Num(-0.0),
                    Value::Num(8388608.0),
                ]),
            ),
        ]);
        assert_eq!(parse(&v.to_json()).unwrap(), v);
        assert_eq!(num(f64::NAN), "null");
        assert_eq!(num(2.0), "2");
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = parse("{\n  \"a\": 1,\n  \"b\" 2\n}").unwrap_err();
        assert_eq!((e.line, e.col), (3, 7));
        assert!(e.msg.contains("':'"), "{e}");
        let e = parse("{\"a\": [1, 2").unwrap_err();
        assert_eq!((e.line, e.col), (1, 12));
        assert!(
            e.msg
                .contains("end of file inside the array opened at line 1, column 7"),
            "{e}"
        );
        let e = parse("1").unwrap_err();
        assert!(e.msg.contains("where '{' or '[' was expected"), "{e}");
        // Not JSON numbers: strings, which the result reader refuses by field.
        let v = parse("[1e999, 2x, -]").unwrap();
        assert_eq!(
            v,
            Value::Arr(["1e999", "2x", "-"].map(|s| Value::Str(s.into())).into())
        );
        let e = parse("{} x").unwrap_err();
        assert!(e.msg.contains("after the end"), "{e}");
        let e = parse("[\"a\nb\"]").unwrap_err();
        assert!(e.msg.contains("control character"), "{e}");
        let e = parse("[\"\\ud800x\"]").unwrap_err();
        assert!(e.msg.contains("surrogate"), "{e}");
        let e = parse("[\"é\"] ü").unwrap_err();
        assert_eq!((e.line, e.col), (1, 7), "columns count characters");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let s = "[".repeat(100_000);
        let e = parse(&s).unwrap_err();
        assert!(e.msg.contains("nested deeper"), "{e}");
        assert!(parse(&format!(
            "{}{}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        ))
        .is_ok());
    }

    #[test]
    fn every_truncation_and_garbage_fails_cleanly() {
        let doc = r#"{"tool": "rdma-direct", "rows": [{"bytes": 2, "t": 1.5e0, "h": [[0.5, 1, 3]]}], "s": "\u00e9x"}"#;
        assert!(parse(doc).is_ok());
        for end in 0..doc.len() {
            if let Some(t) = doc.get(..end) {
                assert!(parse(t).is_err(), "prefix of {end} bytes parsed");
            }
        }
        // Deterministic pseudo-random garbage, including bytes sliced mid-character.
        let mut x: u32 = 12345;
        let alphabet = b"{}[]\":,.-+eE0123456789 \n\\tfnru\xc3\xa9abc";
        for _ in 0..2000 {
            let mut bytes = Vec::new();
            for _ in 0..(x % 40) {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                bytes.push(alphabet[(x >> 16) as usize % alphabet.len()]);
            }
            let s = String::from_utf8_lossy(&bytes);
            let _ = parse(&s);
        }
    }

    #[test]
    fn reads_perftest_4_5_dialect() {
        let t = "{\ntest_info: {\ntest: RDMA_Write_Latency_Test,\nDevice: \"rxe0\",\nTX_depth : 1,\n PCIe_relax_order: Unsupported,\nTest with events: Using_rxe0_comp0,\n},\nresults: {\nMsgSize: 2,\npercentile_99.9: 30.10,\nname: 2x,\n},\n}\n";
        let v = parse(t).unwrap();
        let ti = v.get("test_info").unwrap();
        assert_eq!(
            ti.get("test").and_then(Value::as_str),
            Some("RDMA_Write_Latency_Test")
        );
        assert_eq!(ti.get("Device").and_then(Value::as_str), Some("rxe0"));
        assert_eq!(ti.get("TX_depth").and_then(Value::as_u64), Some(1));
        assert_eq!(
            ti.get("PCIe_relax_order").and_then(Value::as_str),
            Some("Unsupported")
        );
        assert!(ti.get("Test with events").is_some());
        let r = v.get("results").unwrap();
        assert_eq!(r.get("percentile_99.9").and_then(Value::as_f64), Some(30.1));
        assert_eq!(r.get("name").and_then(Value::as_str), Some("2x"));
    }
}
