//! `verify`: build-time assertions run inside the finished image (no device, no weights).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decode::{Cx, Fields, FromNode};
use crate::node::{Node, Value};

/// One check: a Python statement (run with the image's venv `python -c`) or, for images without
/// Python, `{sh: "shell command"}` (run with `sh -c`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum VerifyStep {
    /// A Python statement.
    Python(String),
    /// A shell command.
    Shell(ShellStep),
}

/// `{sh: "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ShellStep {
    /// The command, run with `sh -c` inside the image.
    pub sh: String,
}

/// The keys `{sh: …}` accepts; the schema test holds [`ShellStep`]'s fields to this list.
pub const SHELL_STEP_KEYS: &[&str] = &["sh"];

impl VerifyStep {
    /// A shell check, `{sh: command}`.
    pub fn sh(command: impl Into<String>) -> Self {
        VerifyStep::Shell(ShellStep { sh: command.into() })
    }

    /// The statement or command text.
    pub fn text(&self) -> &str {
        match self {
            VerifyStep::Python(s) => s,
            VerifyStep::Shell(s) => &s.sh,
        }
    }

    /// What runs the text: `python` (the image's venv `python -c`) or `sh` (`sh -c`); the
    /// `lang` of the `{lang, code}` view `verify.sh`'s template reads.
    pub fn lang(&self) -> &'static str {
        match self {
            VerifyStep::Python(_) => "python",
            VerifyStep::Shell(_) => "sh",
        }
    }
}

impl FromNode for VerifyStep {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        match &node.value {
            Value::Map(_) => {
                let f = Fields::new(node, path, SHELL_STEP_KEYS, cx)?;
                let sh = f.req("sh", cx)?;
                Some(VerifyStep::Shell(ShellStep { sh }))
            }
            Value::Str(_) => String::from_node(node, path, cx).map(VerifyStep::Python),
            _ => {
                cx.wrong_type(
                    node,
                    path,
                    "a Python statement (string) or {sh: \"command\"}",
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_says_what_runs_it_and_keeps_its_authored_form() {
        let sh = VerifyStep::sh("true");
        assert_eq!((sh.lang(), sh.text()), ("sh", "true"));
        let py = VerifyStep::Python("import x".into());
        assert_eq!((py.lang(), py.text()), ("python", "import x"));
        // The wire manifest records each as written: a string, or `{sh: …}`.
        let json = serde_json::to_value([&py, &sh]).expect("checks serialize");
        assert_eq!(json, serde_json::json!(["import x", {"sh": "true"}]));
    }
}
