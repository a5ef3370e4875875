//! A small JSON reader and writer for result files (no dependencies).
//!
//! Contract:
//! - [`parse`] reads RFC 8259 JSON into a [`Value`]; [`parse_relaxed`] also reads what
//!   perftest 4.5 writes with `--out_json`: bare keys (`t_min: 1.23,`), bare values
//!   (`Connection_type: RC,`: the text up to the next `,`, newline, `}` or `]`, trimmed; a
//!   number when it reads as one) and a trailing comma before `}` or `]`.
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
    #[cfg(test)]
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

/// Append `s` as a JSON string literal (the escaping is [`crate::json::string`]'s).
pub fn write_str(out: &mut String, s: &str) {
    out.push_str(&crate::json::string(s));
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

/// Parse strict JSON: one value, then only whitespace.
pub fn parse(text: &str) -> Result<Value, JsonError> {
    Parser::new(text, false).document()
}

/// Parse JSON or perftest 4.5's `--out_json` dialect (see the module doc).
pub fn parse_relaxed(text: &str) -> Result<Value, JsonError> {
    Parser::new(text, true).document()
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    relaxed: bool,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(s: &'a str, relaxed: bool) -> Self {
        Parser {
            s,
            b: s.as_bytes(),
            i: 0,
            relaxed,
            depth: 0,
        }
    }

    /// The file ended inside the `what` (object, array, string) opened at byte `open`.
    fn eof_inside(&self, what: &str, open: usize) -> JsonError {
        let opened = self.err(open, "").pos();
        self.err(
            self.i,
            format!("unexpected end of file inside the {what} opened at {opened}"),
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

    fn document(mut self) -> Result<Value, JsonError> {
        self.ws();
        let v = self.value()?;
        self.ws();
        if self.i < self.b.len() {
            return Err(self.err(
                self.i,
                format!("{} after the end of the document", self.describe()),
            ));
        }
        Ok(v)
    }

    fn value(&mut self) -> Result<Value, JsonError> {
        match self.peek() {
            None => Err(self.err(self.i, "unexpected end of file: a value was expected")),
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string().map(Value::Str),
            Some(b'-' | b'0'..=b'9') if !self.relaxed => self.number(),
            Some(b't') if self.word("true") => Ok(Value::Bool(true)),
            Some(b'f') if self.word("false") => Ok(Value::Bool(false)),
            Some(b'n') if self.word("null") => Ok(Value::Null),
            Some(_) if self.relaxed => self.bare_value(),
            Some(_) => Err(self.err(
                self.i,
                format!("{} where a value was expected", self.describe()),
            )),
        }
    }

    fn nested(&mut self, f: fn(&mut Self) -> Result<Value, JsonError>) -> Result<Value, JsonError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.err(self.i, format!("nested deeper than {MAX_DEPTH} levels")));
        }
        self.depth += 1;
        let v = f(self);
        self.depth -= 1;
        v
    }

    /// A literal, only when it is not the start of a longer bare word.
    fn word(&mut self, w: &str) -> bool {
        let end = self.i + w.len();
        if self.b.get(self.i..end) != Some(w.as_bytes()) {
            return false;
        }
        if self.relaxed
            && !matches!(
                self.b.get(end),
                None | Some(b',' | b'}' | b']' | b'\n' | b'\r' | b' ' | b'\t')
            )
        {
            return false;
        }
        self.i = end;
        true
    }

    fn object(&mut self) -> Result<Value, JsonError> {
        let open = self.i;
        self.i += 1;
        let mut kv = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b'}') => {
                    if !kv.is_empty() && !self.relaxed {
                        return Err(self.err(self.i, "trailing comma before '}'"));
                    }
                    self.i += 1;
                    return Ok(Value::Obj(kv));
                }
                None => return Err(self.eof_inside("object", open)),
                _ => {}
            }
            let key = match self.peek() {
                Some(b'"') => self.string()?,
                Some(_) if self.relaxed => self.bare_key()?,
                _ => {
                    return Err(self.err(
                        self.i,
                        format!("{} where a quoted key was expected", self.describe()),
                    ))
                }
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
            let v = self.value()?;
            kv.push((key, v));
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    return Ok(Value::Obj(kv));
                }
                None => return Err(self.eof_inside("object", open)),
                _ => {
                    return Err(self.err(
                        self.i,
                        format!("{} where ',' or '}}' was expected", self.describe()),
                    ))
                }
            }
        }
    }

    fn array(&mut self) -> Result<Value, JsonError> {
        let open = self.i;
        self.i += 1;
        let mut a = Vec::new();
        loop {
            self.ws();
            match self.peek() {
                Some(b']') => {
                    if !a.is_empty() && !self.relaxed {
                        return Err(self.err(self.i, "trailing comma before ']'"));
                    }
                    self.i += 1;
                    return Ok(Value::Arr(a));
                }
                None => return Err(self.eof_inside("array", open)),
                _ => {}
            }
            a.push(self.value()?);
            self.ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Ok(Value::Arr(a));
                }
                None => return Err(self.eof_inside("array", open)),
                _ => {
                    return Err(self.err(
                        self.i,
                        format!("{} where ',' or ']' was expected", self.describe()),
                    ))
                }
            }
        }
    }

    fn hex4(&mut self) -> Result<u32, JsonError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
            .ok_or_else(|| self.err(self.i, "\\u must be followed by 4 hex digits"))?;
        let v = u32::from_str_radix(h, 16).map_err(|_| self.err(self.i, "bad \\u escape"))?;
        self.i += 4;
        Ok(v)
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
                    let e = self.peek();
                    self.i += 1;
                    match e {
                        Some(b'"') => out.push('"'),
                        Some(b'\\') => out.push('\\'),
                        Some(b'/') => out.push('/'),
                        Some(b'b') => out.push('\u{8}'),
                        Some(b'f') => out.push('\u{c}'),
                        Some(b'n') => out.push('\n'),
                        Some(b'r') => out.push('\r'),
                        Some(b't') => out.push('\t'),
                        Some(b'u') => {
                            let hi = self.hex4()?;
                            let c = if (0xD800..0xDC00).contains(&hi) {
                                if self.b.get(self.i..self.i + 2) != Some(b"\\u") {
                                    return Err(self.err(self.i, "unpaired UTF-16 surrogate"));
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(self.err(self.i, "unpaired UTF-16 surrogate"));
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else {
                                hi
                            };
                            match char::from_u32(c) {
                                Some(c) => out.push(c),
                                None => return Err(self.err(self.i, "unpaired UTF-16 surrogate")),
                            }
                        }
                        _ => {
                            self.i -= 1;
                            return Err(self.err(
                                self.i,
                                format!("{} is not a string escape", self.describe()),
                            ));
                        }
                    }
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

    fn number(&mut self) -> Result<Value, JsonError> {
        let start = self.i;
        let digits = |p: &mut Self| {
            let s = p.i;
            while let Some(b'0'..=b'9') = p.peek() {
                p.i += 1;
            }
            p.i - s
        };
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let int_start = self.i;
        let n = digits(self);
        if n == 0 {
            return Err(self.err(self.i, "a digit was expected"));
        }
        if n > 1 && self.b[int_start] == b'0' {
            return Err(self.err(int_start, "leading zero in a number"));
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if digits(self) == 0 {
                return Err(self.err(self.i, "a digit was expected after '.'"));
            }
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if digits(self) == 0 {
                return Err(self.err(self.i, "a digit was expected in the exponent"));
            }
        }
        let text = self.s.get(start..self.i).unwrap_or("");
        match text.parse::<f64>() {
            Ok(v) if v.is_finite() => Ok(Value::Num(v)),
            _ => Err(self.err(start, format!("number {text} is out of range"))),
        }
    }

    /// Relaxed: a key is the text up to ':' (trimmed), on one line.
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

    /// Relaxed: a value is the text up to ',', newline, '}' or ']' (trimmed); a number when
    /// the whole of it reads as a JSON number.
    fn bare_value(&mut self) -> Result<Value, JsonError> {
        let start = self.i;
        while let Some(c) = self.peek() {
            if matches!(c, b',' | b'\n' | b'}' | b']') {
                break;
            }
            self.i += 1;
        }
        let t = self.s.get(start..self.i).unwrap_or("").trim();
        if t.is_empty() {
            return Err(self.err(
                start,
                format!("{} where a value was expected", self.describe()),
            ));
        }
        let mut p = Parser::new(t, false);
        if let Ok(v @ Value::Num(_)) = p.number() {
            if p.i == t.len() {
                return Ok(v);
            }
        }
        Ok(Value::Str(t.to_string()))
    }
}

impl JsonError {
    fn pos(&self) -> String {
        format!("line {}, column {}", self.line, self.col)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_and_escapes() {
        let v = parse(r#" {"a": [1, -2.5e3, true, false, null], "s": "q\"\\\/\n\u00e9\ud83d\ude00", "e": {}} "#)
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
        let e = parse("[1,]").unwrap_err();
        assert!(e.msg.contains("trailing comma"), "{e}");
        let e = parse("01").unwrap_err();
        assert!(e.msg.contains("leading zero"), "{e}");
        let e = parse("1e999").unwrap_err();
        assert!(e.msg.contains("out of range"), "{e}");
        let e = parse("{} x").unwrap_err();
        assert!(e.msg.contains("after the end"), "{e}");
        let e = parse("\"a\nb\"").unwrap_err();
        assert!(e.msg.contains("control character"), "{e}");
        let e = parse("\"\\ud800x\"").unwrap_err();
        assert!(e.msg.contains("surrogate"), "{e}");
        let e = parse("\"é\" ü").unwrap_err();
        assert_eq!((e.line, e.col), (1, 5), "columns count characters");
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
                let _ = parse_relaxed(t);
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
            let _ = parse_relaxed(&s);
        }
    }

    #[test]
    fn relaxed_reads_perftest_4_5_dialect() {
        let t = "{\ntest_info: {\ntest: RDMA_Write_Latency_Test,\nDevice: \"rxe0\",\nTX_depth : 1,\n PCIe_relax_order: Unsupported,\nTest with events: Using_rxe0_comp0,\n},\nresults: {\nMsgSize: 2,\npercentile_99.9: 30.10,\nname: 2x,\n},\n}\n";
        let v = parse_relaxed(t).unwrap();
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
        assert!(parse(t).is_err(), "strict mode refuses bare keys");
    }
}
