//! The doctor's findings as a report (feature `report`): one text line per finding under
//! its section's title and a summary line ([`render_text`]), or one JSON object
//! ([`render_json`]).
//!
//! Contract: pure functions of the [`Section`]s; each returns its text (newline-terminated)
//! and prints nothing. A finding's line is its tag (`[ ok ]`, `[warn]`, `[FAIL]`, `[skip]`),
//! the check's name, what it saw and, when there is one, ` — fix: ` and the fix; JSON strings
//! are escaped by [`json::string`].

use super::{count, Finding, Level, Section};
use crate::report::json;

/// The six-character tag of a level: `[ ok ]`, `[warn]`, `[FAIL]`, `[skip]`.
fn tag(l: Level) -> &'static str {
    match l {
        Level::Ok => "[ ok ]",
        Level::Skip => "[skip]",
        Level::Warn => "[warn]",
        Level::Fail => "[FAIL]",
    }
}

/// The lower-case word of a level in JSON: `ok`, `skip`, `warn`, `fail`.
fn word(l: Level) -> &'static str {
    match l {
        Level::Ok => "ok",
        Level::Skip => "skip",
        Level::Warn => "warn",
        Level::Fail => "fail",
    }
}

/// `[warn] mtu             active 1024 of max 4096 — fix: ...`
fn line(f: &Finding) -> String {
    let mut s = format!("{} {:<15} {}", tag(f.level), f.check, f.saw);
    if let Some(fix) = &f.fix {
        s.push_str(" — fix: ");
        s.push_str(fix);
    }
    s
}

/// The text report: a title line per section, one indented line per finding, a summary.
pub fn render_text(sections: &[Section]) -> String {
    let mut s = String::new();
    for sec in sections {
        s.push_str(&format!("{}:\n", sec.title));
        for f in &sec.findings {
            s.push_str(&format!("\t{}\n", line(f)));
        }
    }
    s.push_str(&format!(
        "doctor: {} FAIL, {} warn\n",
        count(sections, Level::Fail),
        count(sections, Level::Warn)
    ));
    s
}

/// The JSON report, one line:
/// `{"sections":[{"title":..,"device":..,"port":..,"checks":[{"level":"ok","check":..,
/// "saw":..,"fix":null}]}],"fail":N,"warn":N}`.
pub fn render_json(sections: &[Section]) -> String {
    let secs: Vec<String> = sections
        .iter()
        .map(|sec| {
            let checks: Vec<String> = sec
                .findings
                .iter()
                .map(|f| {
                    format!(
                        "{{\"level\":\"{}\",\"check\":{},\"saw\":{},\"fix\":{}}}",
                        word(f.level),
                        json::string(f.check),
                        json::string(&f.saw),
                        f.fix.as_deref().map_or("null".to_string(), json::string)
                    )
                })
                .collect();
            format!(
                "{{\"title\":{},\"device\":{},\"port\":{},\"checks\":[{}]}}",
                json::string(&sec.title),
                sec.device
                    .as_deref()
                    .map_or("null".to_string(), json::string),
                sec.port.map_or("null".to_string(), |p| p.to_string()),
                checks.join(",")
            )
        })
        .collect();
    format!(
        "{{\"sections\":[{}],\"fail\":{},\"warn\":{}}}\n",
        secs.join(","),
        count(sections, Level::Fail),
        count(sections, Level::Warn)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_json_reports() {
        let sections = vec![Section {
            title: "mlx5_0 port 1 (Ethernet)".into(),
            device: Some("mlx5_0".into()),
            port: Some(1),
            findings: vec![
                Finding {
                    level: Level::Ok,
                    check: "link",
                    saw: "PORT_ACTIVE".into(),
                    fix: None,
                },
                Finding {
                    level: Level::Fail,
                    check: "pcie width",
                    saw: "x8 of x16".into(),
                    fix: Some("say \"reseat\"\n".into()),
                },
            ],
        }];
        assert_eq!(
            render_text(&sections),
            "mlx5_0 port 1 (Ethernet):\n\
             \t[ ok ] link            PORT_ACTIVE\n\
             \t[FAIL] pcie width      x8 of x16 — fix: say \"reseat\"\n\n\
             doctor: 1 FAIL, 0 warn\n"
        );
        assert_eq!(
            render_json(&sections),
            "{\"sections\":[{\"title\":\"mlx5_0 port 1 (Ethernet)\",\"device\":\"mlx5_0\",\
             \"port\":1,\"checks\":[{\"level\":\"ok\",\"check\":\"link\",\"saw\":\"PORT_ACTIVE\",\
             \"fix\":null},{\"level\":\"fail\",\"check\":\"pcie width\",\"saw\":\"x8 of x16\",\
             \"fix\":\"say \\\"reseat\\\"\\n\"}]}],\"fail\":1,\"warn\":0}\n"
        );
        assert_eq!(json::string("a\u{1}\\"), "\"a\\u0001\\\\\"");
    }
}
