//! Typed getters over the parsed `config.json` that name the field in their errors (see the
//! parent module for why the fields are not read through a serde derive).

use super::N17ConfigError;
use serde_json::{Map, Value};
use std::path::Path;

/// Typed getters over one JSON object that name the field (with `prefix`) in their errors.
pub(super) struct Fields<'a> {
    pub(super) obj: &'a Map<String, Value>,
    pub(super) prefix: &'a str,
    pub(super) path: &'a Path,
}

impl<'a> Fields<'a> {
    fn name(&self, key: &str) -> String {
        format!("{}{key}", self.prefix)
    }
    pub(super) fn missing(&self, key: &str) -> N17ConfigError {
        N17ConfigError::Missing {
            path: self.path.to_owned(),
            field: self.name(key),
        }
    }
    fn wrong(&self, key: &str, expected: &'static str, v: &Value) -> N17ConfigError {
        let mut found = v.to_string();
        if found.len() > 60 {
            found.truncate(57);
            found.push_str("...");
        }
        N17ConfigError::Type {
            path: self.path.to_owned(),
            field: self.name(key),
            expected,
            found,
        }
    }
    fn as_usize(&self, key: &str, v: &Value) -> Result<usize, N17ConfigError> {
        v.as_u64()
            .and_then(|u| usize::try_from(u).ok())
            .ok_or_else(|| self.wrong(key, "a non-negative integer", v))
    }
    pub(super) fn usize(&self, key: &str) -> Result<usize, N17ConfigError> {
        let v = self.obj.get(key).ok_or_else(|| self.missing(key))?;
        self.as_usize(key, v)
    }
    pub(super) fn usize_or(&self, key: &str, default: usize) -> Result<usize, N17ConfigError> {
        match self.obj.get(key) {
            None => Ok(default),
            Some(v) => self.as_usize(key, v),
        }
    }
    pub(super) fn opt_usize(&self, key: &str) -> Result<Option<usize>, N17ConfigError> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => self.as_usize(key, v).map(Some),
        }
    }
    pub(super) fn opt_f64(&self, key: &str) -> Result<Option<f64>, N17ConfigError> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| self.wrong(key, "a number or null", v)),
        }
    }
    pub(super) fn bool_or(&self, key: &str, default: bool) -> Result<bool, N17ConfigError> {
        match self.obj.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| self.wrong(key, "a boolean", v)),
        }
    }
    pub(super) fn string(&self, key: &str) -> Result<String, N17ConfigError> {
        let v = self.obj.get(key).ok_or_else(|| self.missing(key))?;
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| self.wrong(key, "a string", v))
    }
    pub(super) fn string_or(&self, key: &str, default: &str) -> Result<String, N17ConfigError> {
        match self.obj.get(key) {
            None => Ok(default.to_owned()),
            Some(_) => self.string(key),
        }
    }
    pub(super) fn opt_string_or(
        &self,
        key: &str,
        default: Option<&str>,
    ) -> Result<Option<String>, N17ConfigError> {
        match self.obj.get(key) {
            None => Ok(default.map(str::to_owned)),
            Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_str()
                .map(|s| Some(s.to_owned()))
                .ok_or_else(|| self.wrong(key, "a string or null", v)),
        }
    }
    pub(super) fn object(
        &self,
        key: &str,
    ) -> Result<Option<&'a Map<String, Value>>, N17ConfigError> {
        match self.obj.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Object(m)) => Ok(Some(m)),
            Some(v) => Err(self.wrong(key, "an object", v)),
        }
    }
    pub(super) fn opt_pair_or(
        &self,
        key: &str,
        default: Option<[usize; 2]>,
    ) -> Result<Option<[usize; 2]>, N17ConfigError> {
        match self.obj.get(key) {
            None => Ok(default),
            Some(Value::Null) => Ok(None),
            Some(v) => {
                let pair = v.as_array().filter(|a| a.len() == 2).and_then(|a| {
                    let x = a[0].as_u64().and_then(|u| usize::try_from(u).ok())?;
                    let y = a[1].as_u64().and_then(|u| usize::try_from(u).ok())?;
                    Some([x, y])
                });
                pair.map(Some)
                    .ok_or_else(|| self.wrong(key, "two non-negative integers or null", v))
            }
        }
    }
}
