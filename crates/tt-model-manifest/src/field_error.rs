//! [`FieldError`]: a problem with one manifest field found outside the lint's own pass (a
//! source path that is gone, a git ref that names nothing, a wheel that is not one). It keeps
//! the dotted path of the field, so whoever holds the manifest text can locate it and render
//! it as `lint` renders its findings.

use crate::diagnostic::Diagnostic;
use crate::node::Pos;

/// A problem with one manifest field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct FieldError {
    /// The rule's stable kebab-case code (`source-missing`, `git-source`, …), as lint's.
    pub code: &'static str,
    /// The dotted path of the field (`source.code[1]`, `runtime.plugin.ref`).
    pub field: String,
    /// Where the field is in the manifest text, once located ([`FieldError::locate_in`]);
    /// boxed to keep the error small on every `Result` that carries it.
    pub span: Option<Box<Pos>>,
    /// What is wrong, in one sentence.
    pub message: String,
    /// What to do about it.
    pub help: Option<String>,
}

impl FieldError {
    /// A problem with `field`, not yet located.
    pub fn new(code: &'static str, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            code,
            field: field.into(),
            span: None,
            message: message.into(),
            help: None,
        }
    }

    /// The same, with a hint of what to do.
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Locates the field in the manifest text `src`, as lint locates its findings (a scalar's
    /// value, or the key of a block; the deepest existing parent when the field is absent).
    pub fn locate_in(&mut self, src: &str) {
        self.span = crate::anchor(src, &self.field).map(Box::new);
    }

    /// The finding `lint` would print for this problem (located in `src` when not yet).
    pub fn to_diagnostic(&self, src: &str) -> Diagnostic {
        let pos = self
            .span
            .as_deref()
            .copied()
            .or_else(|| crate::anchor(src, &self.field))
            .unwrap_or(Pos::START);
        let mut d = Diagnostic::error(self.code, self.field.clone(), pos, self.message.clone());
        d.help = self.help.clone();
        d
    }
}
