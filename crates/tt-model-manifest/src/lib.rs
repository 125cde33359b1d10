//! `tt-model-manifest`: the `tt-model.yaml` authoring manifest (schema 5.1), its checks, its
//! JSON Schema and the published wire manifest (`tt_kernel_manifest.json`).
//!
//! A minimal manifest:
//!
//! ```yaml
//! schema: "5.1"
//! repo: acme/tiny-llm-p150
//! name: tiny-llm-p150
//! weights: {repo: acme/tiny-llm, revision: 0123456789abcdef0123456789abcdef01234567}
//! arch: blackhole
//! source: {tt_metal: ../tt-metal, code: [models/tiny], ubuntu: "22.04", python: "3.12"}
//! runtime: {vllm: {version: "0.10.1"}, plugin: {path: ../vllm-tt-plugin}}
//! serve: {hardware: p150, mesh_device: P150, max_num_seqs: 32, block_size: 64}
//! ```
//!
//! [`check_str`] returns every finding (errors and warnings, each located); [`load_path`] is
//! the "give me a valid manifest or an error" entry point the other crates use.
//!
//! ```
//! let src = "schema: '5.1'\nrepo: acme/x\nname: x\nweights: acme/w\narch: blackhole\nsource: {tt_metal: t, code: [m], ubuntu: '22.04', python: '3.12'}\nkind: tt-dit-server\nruntime: {app: 'm.app:app'}\nserve: {hardware: p150, mesh_devcie: P150}\n";
//! let report = tt_model_manifest::check_str(src, &Default::default());
//! assert!(report.manifest.is_none());
//! let typo = report.diagnostics.iter().find(|d| d.code == "unknown-key").unwrap();
//! assert_eq!((typo.pos.line, typo.pos.col), (9, 25));
//! assert_eq!(typo.label.as_deref(), Some("did you mean `mesh_device`?"));
//! ```
// A library reports through its return values and its callers' printers, never the terminal.
#![warn(missing_docs)]

pub mod decode;
pub mod diagnostic;
pub mod field_error;
pub mod glob;
pub mod launch;
pub mod node;
pub mod numfmt;
mod parse;
pub mod profile;
pub mod resolved;
pub mod schema;
pub mod shell;
pub mod sources;
pub mod timefmt;
pub mod types;
pub mod validate;
pub mod wire;

use std::path::{Path, PathBuf};

pub use diagnostic::{Diagnostic, Severity};
pub use field_error::FieldError;
pub use node::{Node, Pos};
pub use parse::MAX_MANIFEST_BYTES;
pub use types::*;
pub use wire::{Built, ImageRef, Producer, WireError, WireManifest};

/// How to check a manifest.
#[derive(Debug, Clone, Default)]
pub struct CheckOptions {
    /// Also check the file system from this directory: every `source.code` / `extra_code`
    /// path exists and `runtime.app`'s package is shipped (`--check-sources`).
    pub sources_base: Option<PathBuf>,
}

/// Everything known about one manifest text.
#[derive(Debug, Clone)]
pub struct Report {
    /// The decoded manifest, when there is no error.
    pub manifest: Option<Manifest>,
    /// Every finding, errors first, each in document order.
    pub diagnostics: Vec<Diagnostic>,
}

impl Report {
    /// Whether any finding is an error.
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// The number of errors and of warnings.
    pub fn counts(&self) -> (usize, usize) {
        let errors = self.diagnostics.iter().filter(|d| d.is_error()).count();
        (errors, self.diagnostics.len() - errors)
    }
}

/// Checks manifest bytes (UTF-8 required).
pub fn check_bytes(bytes: &[u8], options: &CheckOptions) -> Report {
    match std::str::from_utf8(bytes) {
        Ok(src) => check_str(src, options),
        Err(err) => Report {
            manifest: None,
            diagnostics: vec![parse::utf8_error(bytes, &err)],
        },
    }
}

/// Checks manifest text: parse, decode, semantic rules and warnings.
pub fn check_str(src: &str, options: &CheckOptions) -> Report {
    let root = match parse::parse(src) {
        Ok(root) => root,
        Err(d) => {
            return Report {
                manifest: None,
                diagnostics: vec![*d],
            };
        }
    };
    let mut cx = decode::Cx::new(src);
    let decoded = <Manifest as decode::FromNode>::from_node(&root, "", &mut cx);
    let mut diagnostics = cx.diags;
    let schema_one = validate::legacy::schema_one(&root, src);
    if let Some(d) = &schema_one {
        // Its `type` key and integer schema are what the finding explains.
        diagnostics.retain(|x| !(x.path == "type" || x.path == "schema"));
        diagnostics.push(d.clone());
    }
    // A kind that did not decode (or a schema-1 `type:`) leaves the kind unknown: the checks
    // that depend on it are skipped, every other check still runs.
    let kind_bad = diagnostics.iter().any(|d| d.is_error() && d.path == "kind");
    if let Some(manifest) = &decoded {
        diagnostics.extend(validate::validate(
            manifest,
            &root,
            src,
            options.sources_base.as_deref(),
            validate::Known {
                schema: schema_one.is_none(),
                kind: schema_one.is_none() && !kind_bad,
            },
        ));
    }
    drop_explained_by_typos(&mut diagnostics);
    diagnostics.sort_by_key(|d| (d.severity, d.pos.line, d.pos.col));
    let has_errors = diagnostics.iter().any(Diagnostic::is_error);
    Report {
        manifest: decoded.filter(|_| !has_errors),
        diagnostics,
    }
}

/// One problem, one message: a missing key that a misspelt key next to it explains (`arch`
/// missing, `acrh` unknown with "did you mean `arch`?") is reported only as the typo.
fn drop_explained_by_typos(diagnostics: &mut Vec<Diagnostic>) {
    fn split(path: &str) -> (&str, &str) {
        path.rsplit_once('.').unwrap_or(("", path))
    }
    let typos: Vec<(String, String)> = diagnostics
        .iter()
        .filter(|d| d.code == "unknown-key")
        .filter_map(|d| {
            let meant = d
                .label
                .as_deref()?
                .strip_prefix("did you mean `")?
                .strip_suffix("`?")?;
            Some((split(&d.path).0.to_owned(), meant.to_owned()))
        })
        .collect();
    diagnostics.retain(|d| {
        if !matches!(d.code, "missing-key" | "required-serve-field") {
            return true;
        }
        let (parent, field) = split(&d.path);
        !typos.iter().any(|(p, meant)| p == parent && meant == field)
    });
}

/// Why a manifest could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read manifest `{}`", path.display())]
    Read {
        /// The manifest path.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The manifest has errors; each is located.
    #[error("{}", render_invalid(path, diagnostics))]
    Invalid {
        /// The manifest path.
        path: PathBuf,
        /// The manifest text (for rendering snippets).
        source_text: String,
        /// Every finding (errors and warnings).
        diagnostics: Vec<Diagnostic>,
    },
}

fn render_invalid(path: &Path, diagnostics: &[Diagnostic]) -> String {
    let errors: Vec<&Diagnostic> = diagnostics.iter().filter(|d| d.is_error()).collect();
    let mut out = format!(
        "`{}` has {} error{}",
        path.display(),
        errors.len(),
        if errors.len() == 1 { "" } else { "s" }
    );
    for d in errors {
        out.push_str("\n  ");
        out.push_str(&d.one_line(&path.display().to_string()));
    }
    out
}

/// Where the node at a dotted path (`runtime.plugin.ref`) sits in manifest text, for errors
/// found after validation (a git ref that resolves to nothing, a path that is gone). The
/// deepest existing node when the path does not exist; `None` when the text does not parse.
pub fn locate(src: &str, path: &str) -> Option<Pos> {
    parse::parse(src).ok().map(|root| root.locate(path).pos)
}

/// Where a finding about the dotted path `path` points in manifest text, as lint places its
/// own findings: a scalar's value, or the key of a block (the deepest existing parent when the
/// path does not exist). `None` when the text does not parse.
pub fn anchor(src: &str, path: &str) -> Option<Pos> {
    parse::parse(src)
        .ok()
        .map(|root| root.locate(path).anchor())
}

/// Reads and checks a manifest file: the manifest and its warnings, or every error.
pub fn load_path(
    path: &Path,
    options: &CheckOptions,
) -> Result<(Manifest, Vec<Diagnostic>), ManifestError> {
    let bytes = std::fs::read(path).map_err(|source| ManifestError::Read {
        path: path.to_owned(),
        source,
    })?;
    let report = check_bytes(&bytes, options);
    match report.manifest {
        Some(manifest) => Ok((manifest, report.diagnostics)),
        None => Err(ManifestError::Invalid {
            path: path.to_owned(),
            source_text: String::from_utf8_lossy(&bytes).into_owned(),
            diagnostics: report.diagnostics,
        }),
    }
}
