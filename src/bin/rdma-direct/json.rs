//! JSON text for the commands' `--json` output (no serde: the crate's dependencies are fixed).

/// A JSON string literal for `s`: quotes, backslashes and control characters escaped.
pub fn string(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if u32::from(c) < 0x20 => o.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_quotes_backslashes_and_controls() {
        assert_eq!(super::string("a\u{1}\\"), "\"a\\u0001\\\\\"");
        assert_eq!(super::string("say \"x\"\n\t"), "\"say \\\"x\\\"\\n\\t\"");
    }
}
