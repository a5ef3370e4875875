//! Field access into a parsed JSON object for the result-file readers (this tool's schema and
//! perftest's `--out_json`).
//!
//! Contract: every accessor returns the value or an error naming the field by its path from
//! the document's root (`"tool"`, `test_info.duration`) and what was found instead; nothing
//! panics.

use crate::report::json::Value;

/// Field access with errors that name the field.
pub(super) struct Obj<'a> {
    pub(super) v: &'a Value,
    pub(super) at: String,
}

impl<'a> Obj<'a> {
    pub(super) fn new(v: &'a Value, at: impl Into<String>) -> Result<Obj<'a>, String> {
        let at = at.into();
        match v {
            Value::Obj(_) => Ok(Obj { v, at }),
            other => Err(format!("{at}: expected an object, found {}", other.kind())),
        }
    }
    pub(super) fn name(&self, key: &str) -> String {
        if self.at.is_empty() {
            format!("\"{key}\"")
        } else {
            format!("{}.{key}", self.at)
        }
    }
    pub(super) fn req(&self, key: &str) -> Result<&'a Value, String> {
        self.v
            .get(key)
            .ok_or_else(|| format!("{}: missing", self.name(key)))
    }
    pub(super) fn str(&self, key: &str) -> Result<String, String> {
        match self.req(key)? {
            Value::Str(s) => Ok(s.clone()),
            o => Err(format!(
                "{}: expected a string, found {}",
                self.name(key),
                o.kind()
            )),
        }
    }
    pub(super) fn str_or(&self, key: &str, default: &str) -> Result<String, String> {
        match self.v.get(key) {
            None => Ok(default.to_string()),
            Some(_) => self.str(key),
        }
    }
    /// A number; `null` (what the writer puts for a non-finite value) reads as NaN.
    pub(super) fn f64(&self, key: &str) -> Result<f64, String> {
        match self.req(key)? {
            Value::Num(v) => Ok(*v),
            Value::Null => Ok(f64::NAN),
            o => Err(format!(
                "{}: expected a number, found {}",
                self.name(key),
                o.kind()
            )),
        }
    }
    pub(super) fn opt_f64(&self, key: &str) -> Result<Option<f64>, String> {
        match self.v.get(key) {
            None => Ok(None),
            Some(_) => self.f64(key).map(Some),
        }
    }
    pub(super) fn u64(&self, key: &str) -> Result<u64, String> {
        let v = self.req(key)?;
        v.as_u64().ok_or_else(|| {
            format!(
                "{}: expected a whole number from 0 to 2^53, found {}",
                self.name(key),
                match v {
                    Value::Num(x) => x.to_string(),
                    o => o.kind().to_string(),
                }
            )
        })
    }
}
