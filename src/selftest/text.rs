//! The ladder as text: one rung's lines as the table shows them ([`rung`]) and the whole
//! ladder as one JSON document for a bug report ([`json`], feature `report`).
//!
//! Contract: pure functions of the rungs; each returns its text and prints nothing. A rung
//! that passed or does not apply is one line (number, mark, name, what happened); a failed
//! one adds what was expected and what happened on lines of their own.

use std::fmt::Write as _;

use super::{Outcome, Rung};

/// Rung `i` (0-based; shown 1-based) as the table shows it, newline-terminated.
pub fn rung(i: usize, r: &Rung) -> String {
    let n = i + 1;
    let mark = match r.outcome {
        Outcome::Pass => "ok  ",
        Outcome::Fail => "FAIL",
        Outcome::NotApplicable => "n/a ",
    };
    let mut s = String::new();
    if r.outcome != Outcome::Fail {
        let _ = writeln!(s, "  [{n:2}] {mark} {:<28} {}", r.name, r.happened);
    } else {
        let _ = writeln!(s, "  [{n:2}] {mark} {}", r.name);
        let _ = writeln!(s, "       expected: {}", r.expected);
        let _ = writeln!(s, "       happened: {}", r.happened);
    }
    s
}

/// The ladder run on `dev` with `provider` (how it was chosen) as one JSON object, one line:
/// every rung with its result, `stopped_at` the failed rung (1-based) or null.
#[cfg(feature = "report")]
pub fn json(dev: &str, provider: &str, rungs: &[Rung], failed: Option<usize>) -> String {
    use crate::report::json;
    let items: Vec<String> = rungs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "{{\"rung\":{},\"name\":{},\"result\":{},\"expected\":{},\"happened\":{}}}",
                i + 1,
                json::string(r.name),
                json::string(match r.outcome {
                    Outcome::Pass => "pass",
                    Outcome::Fail => "fail",
                    Outcome::NotApplicable => "n/a",
                }),
                json::string(&r.expected),
                json::string(&r.happened)
            )
        })
        .collect();
    format!(
        "{{\"device\":{},\"provider\":{},\"version\":{},\"stopped_at\":{},\"rungs\":[{}]}}",
        json::string(dev),
        json::string(provider),
        json::string(env!("CARGO_PKG_VERSION")),
        failed.map_or("null".to_string(), |i| (i + 1).to_string()),
        items.join(",")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(outcome: Outcome) -> Rung {
        Rung {
            name: "open",
            outcome,
            expected: "the device opens".into(),
            happened: "sim0 \"x\"".into(),
        }
    }

    #[test]
    fn a_rung_is_one_line_unless_it_failed() {
        assert_eq!(
            rung(2, &r(Outcome::Pass)),
            "  [ 3] ok   open                         sim0 \"x\"\n"
        );
        assert_eq!(
            rung(9, &r(Outcome::Fail)),
            "  [10] FAIL open\n       expected: the device opens\n       happened: sim0 \"x\"\n"
        );
    }

    #[cfg(feature = "report")]
    #[test]
    fn the_ladder_is_one_json_object() {
        let j = json("sim0", "sim", &[r(Outcome::Fail)], Some(0));
        assert_eq!(
            j,
            format!(
                "{{\"device\":\"sim0\",\"provider\":\"sim\",\"version\":\"{}\",\"stopped_at\":1,\
                 \"rungs\":[{{\"rung\":1,\"name\":\"open\",\"result\":\"fail\",\
                 \"expected\":\"the device opens\",\"happened\":\"sim0 \\\"x\\\"\"}}]}}",
                env!("CARGO_PKG_VERSION")
            )
        );
    }
}
