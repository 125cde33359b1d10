//! Findings about a manifest, and how they are rendered: a rustc-style snippet with a caret for
//! people, `::error file=…` annotations for GitHub Actions, JSON for tools.
//!
//! The library never prints; colour is the caller's decision (`color` arguments).

use std::fmt::Write as _;

use serde::Serialize;

use crate::node::Pos;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The manifest cannot be used.
    Error,
    /// The manifest works, but something is probably wrong (or a later step will refuse it).
    Warning,
}

impl Severity {
    fn word(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One finding, located in the manifest text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    /// Error or warning.
    pub severity: Severity,
    /// A stable kebab-case identifier of the rule (`unknown-key`, `hardware-label`, …).
    pub code: &'static str,
    /// The dotted path of the offending node (`serve_profiles[1].hardware`); empty for the whole
    /// document.
    pub path: String,
    /// Where it is.
    #[serde(flatten)]
    pub pos: Pos,
    /// What is wrong, in one sentence.
    pub message: String,
    /// A short note printed under the caret (typically "did you mean `x`?").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// A longer hint: what to do, or what is accepted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub help: Option<String>,
}

impl Diagnostic {
    /// A new error.
    pub fn error(
        code: &'static str,
        path: impl Into<String>,
        pos: Pos,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity: Severity::Error,
            code,
            path: path.into(),
            pos,
            message: message.into(),
            label: None,
            help: None,
        }
    }

    /// A new warning.
    pub fn warning(
        code: &'static str,
        path: impl Into<String>,
        pos: Pos,
        message: impl Into<String>,
    ) -> Self {
        Self {
            severity: Severity::Warning,
            ..Self::error(code, path, pos, message)
        }
    }

    /// Adds the note under the caret.
    #[must_use]
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = Some(label.into());
        self
    }

    /// Adds a hint.
    #[must_use]
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    /// Whether this is an error.
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `file:line:col: severity: message` on one line (logs, error chains).
    pub fn one_line(&self, file: &str) -> String {
        let mut s = format!("{file}:{}: {}: ", self.pos, self.severity.word());
        if !self.path.is_empty() {
            let _ = write!(s, "`{}`: ", self.path);
        }
        s.push_str(&self.message);
        if let Some(label) = &self.label {
            let _ = write!(s, " ({label})");
        }
        s
    }

    /// The human rendering: header, location, source snippet with a caret, help.
    pub fn render(&self, file: &str, src: &str, color: bool) -> String {
        let paint = |code: &str, text: &str| {
            if color {
                format!("\x1b[{code}m{text}\x1b[0m")
            } else {
                text.to_owned()
            }
        };
        let sev_color = match self.severity {
            Severity::Error => "1;31",
            Severity::Warning => "1;33",
        };
        let line_no = self.pos.line.to_string();
        let gutter = " ".repeat(line_no.len());
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{}{} {}",
            paint(
                sev_color,
                &format!("{}[{}]", self.severity.word(), self.code)
            ),
            paint("1", ":"),
            paint("1", &self.message)
        );
        let at = if self.path.is_empty() {
            String::new()
        } else {
            format!(" at `{}`", self.path)
        };
        let _ = writeln!(
            out,
            "{gutter}{} {file}:{}{at}",
            paint("34", "-->"),
            self.pos
        );
        if let Some(text) = line_text(src, self.pos.line) {
            let bar = paint("34", "|");
            let _ = writeln!(out, "{gutter} {bar}");
            let _ = writeln!(
                out,
                "{} {bar} {}",
                paint("34", &line_no),
                text.replace('\t', " ")
            );
            let col = usize::try_from(self.pos.col.max(1)).unwrap_or(1) - 1;
            let width = caret_width(
                text,
                col,
                self.pos
                    .len
                    .and_then(|len| span_chars(src, self.pos.offset, len)),
            );
            let pad = " ".repeat(text.chars().take(col).count());
            let carets = "^".repeat(width);
            let label = self
                .label
                .as_deref()
                .map(|l| format!(" {l}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{gutter} {bar} {pad}{}",
                paint(sev_color, &format!("{carets}{label}"))
            );
        }
        if let Some(help) = &self.help {
            let _ = writeln!(
                out,
                "{gutter} {} {}: {help}",
                paint("34", "="),
                paint("1", "help")
            );
        }
        out
    }

    /// A GitHub Actions workflow command (`::error file=…,line=…,col=…::message`).
    pub fn github(&self, file: &str) -> String {
        let command = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        let mut message = String::new();
        if !self.path.is_empty() {
            let _ = write!(message, "`{}`: ", self.path);
        }
        message.push_str(&self.message);
        if let Some(label) = &self.label {
            let _ = write!(message, " ({label})");
        }
        if let Some(help) = &self.help {
            let _ = write!(message, "\n{help}");
        }
        format!(
            "::{command} file={},line={},col={},title={}::{}",
            escape_property(file),
            self.pos.line,
            self.pos.col,
            escape_property(&format!("tt-model lint: {}", self.code)),
            escape_data(&message)
        )
    }
}

/// The text of 1-based `line` without its line break.
fn line_text(src: &str, line: u32) -> Option<&str> {
    let index = usize::try_from(line).ok()?.checked_sub(1)?;
    src.split('\n').nth(index).map(|l| l.trim_end_matches('\r'))
}

/// How many characters a span of `len` bytes at `offset` covers (on its first line).
fn span_chars(src: &str, offset: Option<usize>, len: usize) -> Option<usize> {
    let start = offset?;
    let text = src.get(start..start.checked_add(len)?)?;
    Some(text.split('\n').next().unwrap_or("").chars().count())
}

/// The caret's width: the span on this line, or else the token at `col`, at least 1.
fn caret_width(line: &str, col: usize, span: Option<usize>) -> usize {
    let rest: String = line.chars().skip(col).collect();
    let available = rest.chars().count().max(1);
    let token = rest
        .chars()
        .take_while(|c| !c.is_whitespace() && *c != ':' && *c != ',')
        .count();
    let width = match span {
        Some(w) if w > 0 => w,
        _ => token,
    };
    width.clamp(1, available)
}

fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// The closest candidate to `word`, when it is close enough to be a likely typo.
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (c, strsim::jaro_winkler(&lower, &c.to_ascii_lowercase())))
        .filter(|(c, score)| {
            *score >= 0.82 || (c.len() > 3 && lower.contains(&c.to_ascii_lowercase()))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_keys_only() {
        let keys = ["repo", "revision", "allow_patterns", "ignore_patterns"];
        assert_eq!(suggest("allow_pattern", keys), Some("allow_patterns"));
        assert_eq!(suggest("revison", keys), Some("revision"));
        assert_eq!(suggest("zzz", keys), None);
    }

    #[test]
    fn renders_snippet_with_caret() {
        let src = "weights:\n  allow_pattern: [x]\n";
        let d = Diagnostic::error(
            "unknown-key",
            "weights.allow_pattern",
            Pos::at(2, 3),
            "unknown key `allow_pattern`",
        )
        .with_label("did you mean `allow_patterns`?");
        let text = d.render("m.yaml", src, false);
        assert_eq!(
            text,
            "error[unknown-key]: unknown key `allow_pattern`\n --> m.yaml:2:3 at `weights.allow_pattern`\n  |\n2 |   allow_pattern: [x]\n  |   ^^^^^^^^^^^^^ did you mean `allow_patterns`?\n"
        );
    }

    #[test]
    fn github_annotation_escapes() {
        let d = Diagnostic::warning("card-gaps", "card", Pos::at(3, 1), "50% done\nnext");
        assert_eq!(
            d.github("a,b.yaml"),
            "::warning file=a%2Cb.yaml,line=3,col=1,title=tt-model lint%3A card-gaps::`card`: 50%25 done%0Anext"
        );
    }
}
