//! The scenario language's tokens: numbers (decimal, hex, `K`/`M` suffixes, counted
//! `V+i*K` forms), fills, access flags, hex byte strings, `key=value`, identifiers and
//! `[variant]` heads. Each function takes one token and returns its value or a message
//! naming what was wrong (the caller adds the line).

use std::time::Duration;

use super::kinds;
use crate::providers::Access;
use crate::scenario::{Fill, PostOp, POST_ERROR_NAMES};

/// A parse step's result: the value, or the message for this line.
pub(super) type PResult<T> = Result<T, String>;

pub(super) fn op_kw(op: PostOp) -> &'static str {
    match op {
        PostOp::Send => "send",
        PostOp::SendImm => "send_imm",
        PostOp::Write => "write",
        PostOp::WriteImm => "write_imm",
        PostOp::Read => "read",
        PostOp::Cas => "cas",
        PostOp::Faa => "faa",
    }
}

pub(super) fn split_variant(head: &str) -> PResult<(&str, Option<String>)> {
    match head.split_once('[') {
        None => Ok((head, None)),
        Some((kw, rest)) => {
            let v = rest
                .strip_suffix(']')
                .ok_or_else(|| format!("'{head}': a variant is written KEYWORD[tag]"))?;
            for term in v.split(',') {
                let name = term.strip_prefix('!').unwrap_or(term);
                if name.is_empty()
                    || !name
                        .bytes()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
                {
                    return Err(format!(
                        "bad variant tag '{v}' (names of lowercase letters, digits and '_', \
                         '!' for not, ',' for and: sim, mlx5, verbs, rxe or a device name)"
                    ));
                }
            }
            if kinds(&Some(v.to_string())) == 0 {
                return Err(format!("tag '{v}' applies on no device"));
            }
            Ok((kw, Some(v.to_string())))
        }
    }
}

pub(super) fn one_arg<'a>(args: &[&'a str], usage: &str) -> PResult<&'a str> {
    match args {
        [a] => Ok(a),
        _ => Err(format!("usage: {usage}")),
    }
}

pub(super) fn check_ident(n: &str) -> PResult<()> {
    let ok = !n.is_empty()
        && n.bytes()
            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
        && n.as_bytes()[0].is_ascii_alphabetic();
    if ok {
        Ok(())
    } else {
        Err(format!(
            "bad name '{n}' (a letter, then letters, digits, '_' or '-')"
        ))
    }
}

pub(super) fn kv(tok: &str) -> PResult<(&str, &str)> {
    tok.split_once('=')
        .filter(|(k, v)| !k.is_empty() && !v.is_empty())
        .ok_or_else(|| format!("expected KEY=VALUE, got '{tok}'"))
}

/// A number: decimal, `0x` hex, `_` separators, and for sizes a `K` / `M` suffix (KiB, MiB).
pub(crate) fn parse_u64(s: &str) -> PResult<u64> {
    let t: String = s.chars().filter(|&c| c != '_').collect();
    let (digits, mult) = if let Some(d) = t.strip_suffix('K') {
        (d, 1u64 << 10)
    } else if let Some(d) = t.strip_suffix('M') {
        (d, 1u64 << 20)
    } else {
        (t.as_str(), 1)
    };
    let v = if let Some(h) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        u64::from_str_radix(h, 16)
    } else {
        digits.parse::<u64>()
    }
    .map_err(|_| format!("bad number '{s}'"))?;
    v.checked_mul(mult)
        .ok_or_else(|| format!("number '{s}' overflows"))
}

/// [`parse_counted_u32`] for 64-bit values.
pub(super) fn parse_counted_u64(s: &str) -> PResult<(u64, u64)> {
    match s.split_once("+i") {
        None => Ok((parse_u64(s)?, 0)),
        Some((base, "")) => Ok((parse_u64(base)?, 1)),
        Some((base, rest)) => match rest.strip_prefix('*') {
            Some(k) => Ok((parse_u64(base)?, parse_u64(k)?)),
            None => Err(format!("'{s}': a counted value is V, V+i or V+i*K")),
        },
    }
}

/// A value that may count with a repetition: `V`, `V+i` or `V+i*K` (`i` = 0, 1, ...).
/// Returns (V, K).
pub(super) fn parse_counted_u32(s: &str) -> PResult<(u32, u32)> {
    match s.split_once("+i") {
        None => Ok((parse_u32(s)?, 0)),
        Some((base, "")) => Ok((parse_u32(base)?, 1)),
        Some((base, rest)) => match rest.strip_prefix('*') {
            Some(k) => Ok((parse_u32(base)?, parse_u32(k)?)),
            None => Err(format!("'{s}': a counted value is V, V+i or V+i*K")),
        },
    }
}

pub(super) fn parse_u32(s: &str) -> PResult<u32> {
    u32::try_from(parse_u64(s)?).map_err(|_| format!("'{s}' does not fit in 32 bits"))
}

pub(super) fn parse_usize(s: &str) -> PResult<usize> {
    usize::try_from(parse_u64(s)?).map_err(|_| format!("'{s}' is too large"))
}

pub(super) fn parse_range_u32(s: &str, lo: u32, hi: u32, what: &str) -> PResult<u32> {
    let v = parse_u32(s)?;
    if v < lo || v > hi {
        return Err(format!("{what}={v} out of range ({lo} ..= {hi})"));
    }
    Ok(v)
}

pub(super) fn parse_fill(s: &str) -> PResult<Fill> {
    let (k, v) = match s.split_once(':') {
        Some((k, v)) => (k, Some(v)),
        None => (s, None),
    };
    let byte = |v: &str| -> PResult<u8> {
        u8::try_from(parse_u64(v)?).map_err(|_| format!("'{v}' is not a byte"))
    };
    Ok(match (k, v) {
        ("zero", None) => Fill::Zero,
        ("byte", Some(v)) => Fill::Byte(byte(v)?),
        ("seq", None) => Fill::Seq(0),
        ("seq", Some(v)) => Fill::Seq(byte(v)?),
        ("rand", Some(v)) => Fill::Rand(parse_u64(v)?),
        _ => {
            return Err(format!(
                "bad fill '{s}' (zero, byte:N, seq, seq:START, rand:SEED)"
            ))
        }
    })
}

pub(super) fn parse_access(s: &str) -> PResult<u32> {
    let mut a = 0;
    for part in s.split(',') {
        a |= match part {
            "all" => Access::ALL.0,
            "none" => 0,
            "lw" => Access::LOCAL_WRITE.0,
            "rw" => Access::REMOTE_WRITE.0,
            "rr" => Access::REMOTE_READ.0,
            "ra" => Access::REMOTE_ATOMIC.0,
            _ => {
                return Err(format!(
                    "bad access '{part}' (all, none, lw, rw, rr, ra; comma separated)"
                ))
            }
        };
    }
    Ok(a)
}

pub(super) fn parse_hex(s: &str) -> PResult<Vec<u8>> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.is_empty() || s.len() % 2 != 0 || !s.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!(
            "hex= needs an even number of hex digits, got '{s}'"
        ));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("bad hex '{s}'")))
        .collect()
}

pub(super) fn parse_reject(s: &str) -> PResult<String> {
    if POST_ERROR_NAMES.contains(&s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "unknown rejection '{s}' (one of {})",
            POST_ERROR_NAMES.join(", ")
        ))
    }
}

/// The longest `within=` bound (a typo must not wait for hours).
const MAX_WITHIN: Duration = Duration::from_secs(600);

/// A duration: `N` followed by `us`, `ms` or `s` (`50ms`, `5s`), at most 600 s.
pub(super) fn parse_duration(s: &str) -> PResult<Duration> {
    let (num, unit): (&str, fn(u64) -> Duration) = if let Some(n) = s.strip_suffix("us") {
        (n, Duration::from_micros)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, Duration::from_millis)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, Duration::from_secs)
    } else {
        return Err(format!(
            "duration '{s}': a number with us, ms or s (50ms, 5s)"
        ));
    };
    let d = num
        .parse::<u64>()
        .map(unit)
        .map_err(|_| format!("duration '{s}': a number with us, ms or s (50ms, 5s)"))?;
    if d.is_zero() || d > MAX_WITHIN {
        return Err(format!("duration '{s}': more than 0 and at most 600s"));
    }
    Ok(d)
}
