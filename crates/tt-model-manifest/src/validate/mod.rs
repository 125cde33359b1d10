//! Semantic checks on a decoded manifest, in the original's order: schema, repo, name,
//! weights, profiles (required fields, mesh, hardware, chip cross-check), runtime per kind,
//! then our additions (sources shape, card, warnings) and, on request, the file-system checks.
//!
//! Every check is a small function that appends [`Diagnostic`]s; none stops the others.

pub mod hardware;
pub(crate) mod legacy;
mod rules;
pub(crate) mod runtime;
mod sources;
mod warnings;

use std::path::Path;

use crate::diagnostic::Diagnostic;
use crate::node::{Node, Pos};
use crate::types::Manifest;

/// What a check needs: the manifest, the tree it came from (for positions) and the findings.
pub(crate) struct Checker<'a> {
    pub m: &'a Manifest,
    pub root: &'a Node,
    pub src: &'a str,
    pub out: Vec<Diagnostic>,
    /// False when the `kind` is a stand-in (a schema-1 manifest, or a kind that did not
    /// decode), so checks that depend on the kind are skipped.
    pub kind_known: bool,
}

impl Checker<'_> {
    /// Where `path` is (or its deepest existing parent).
    pub fn pos(&self, path: &str) -> Pos {
        self.root.locate(path).anchor()
    }

    /// Where a finding about `path` points: a scalar's value, or the key of a block.
    pub fn value_pos(&self, path: &str) -> Pos {
        self.root.locate(path).anchor()
    }

    /// Records an error at `path`.
    pub fn error(
        &mut self,
        code: &'static str,
        path: &str,
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        let pos = self.value_pos(path);
        self.out.push(Diagnostic::error(code, path, pos, message));
        self.out.last_mut().expect("just pushed")
    }

    /// Records a warning at `path`.
    pub fn warning(
        &mut self,
        code: &'static str,
        path: &str,
        message: impl Into<String>,
    ) -> &mut Diagnostic {
        let pos = self.value_pos(path);
        self.out.push(Diagnostic::warning(code, path, pos, message));
        self.out.last_mut().expect("just pushed")
    }
}

/// What the decoded manifest can be trusted for.
pub(crate) struct Known {
    /// False for a schema-1 manifest (it already has its one finding about the schema).
    pub schema: bool,
    /// False when `kind` did not decode or the manifest is schema-1: the kind is a stand-in.
    pub kind: bool,
}

/// Runs every semantic check; with `sources_base`, also checks the file system (paths resolve
/// against it, as `package` resolves them against its working directory).
pub(crate) fn validate(
    m: &Manifest,
    root: &Node,
    src: &str,
    sources_base: Option<&Path>,
    known: Known,
) -> Vec<Diagnostic> {
    let mut c = Checker {
        m,
        root,
        src,
        out: Vec::new(),
        kind_known: known.kind,
    };
    if known.schema {
        rules::schema(&mut c);
    }
    rules::repo_and_name(&mut c);
    rules::weights(&mut c);
    rules::profiles(&mut c);
    if c.kind_known {
        runtime::check(&mut c);
    }
    rules::source_shape(&mut c);
    rules::verify(&mut c);
    rules::card(&mut c);
    warnings::check(&mut c);
    if let Some(base) = sources_base {
        sources::check(&mut c, base);
    }
    c.out
}
