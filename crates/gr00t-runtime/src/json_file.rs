//! Reading the checkpoint's and the processor's JSON files, with one error for a file that
//! cannot be read or parsed: located (`path:line:column`) the way every loader reports it.

use std::path::{Path, PathBuf};

/// A JSON file that could not be read or is not valid JSON for what was expected.
#[derive(Debug, thiserror::Error)]
pub enum JsonFileError {
    /// The I/O cause is part of the message and not also a `source()`, so a report that
    /// walks the chain prints it once.
    #[error("{path}: {cause}")]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        cause: std::io::Error,
    },
    /// The file is not valid JSON or does not match the expected schema.
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        /// The file that failed to parse.
        path: PathBuf,
        /// 1-based line of the error, as `serde_json` reports it.
        line: usize,
        /// 1-based column of the error, as `serde_json` reports it.
        column: usize,
        /// `serde_json`'s description of the error.
        message: String,
    },
}

/// Reads and parses `path` as `T`.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, JsonFileError> {
    let text = std::fs::read_to_string(path).map_err(|cause| JsonFileError::Io {
        path: path.to_owned(),
        cause,
    })?;
    parse_json(&text, path)
}

/// Parses `text` as `T`; `path` only labels the error.
pub fn parse_json<T: serde::de::DeserializeOwned>(
    text: &str,
    path: &Path,
) -> Result<T, JsonFileError> {
    serde_json::from_str(text).map_err(|e| JsonFileError::Parse {
        path: path.to_owned(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })
}
