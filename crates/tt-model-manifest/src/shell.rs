//! POSIX shell words: the workspace's one quoter (generated scripts, `serve --print`'s
//! `docker run` line, `curl --print`) and its one check of an environment variable name.

/// Whether `s` can stand as a shell word unquoted: only characters no shell treats specially
/// (Python's `shlex.quote` keeps the same set bare).
fn is_bare(s: &str) -> bool {
    !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '_' | '@' | '%' | '+' | '=' | ':' | ',' | '.' | '/' | '-')
        })
}

/// Quotes `s` as one POSIX shell word. Words made only of characters no shell treats
/// specially stay bare (readable scripts); anything else is single-quoted, with embedded
/// single quotes written as `'\''`.
pub fn quote(s: &str) -> String {
    if is_bare(s) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Quotes `s` exactly as Python's `shlex.quote` does (embedded single quotes as `'"'"'`),
/// for output that must match the Python original's byte for byte.
pub fn shlex_quote(s: &str) -> String {
    if is_bare(s) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r#"'"'"'"#))
    }
}

/// Whether `s` is a valid environment variable name (what `export NAME=…` accepts).
pub fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(quote("fastapi==0.115"), "fastapi==0.115");
        assert_eq!(quote("a/b:c,d@e%f+g=h"), "a/b:c,d@e%f+g=h");
        assert_eq!(quote(""), "''");
        assert_eq!(quote("{\"x\": 1}"), r#"'{"x": 1}'"#);
        assert_eq!(quote("1.0; touch /tmp/pwned"), "'1.0; touch /tmp/pwned'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$(id)"), "'$(id)'");
        assert_eq!(quote("a\nb"), "'a\nb'");
        assert_eq!(quote("é"), "'é'", "only ASCII stays bare, as in shlex");
        assert_eq!(shlex_quote("it's"), r#"'it'"'"'s'"#);
        assert_eq!(shlex_quote("a=b"), "a=b");
        assert_eq!(shlex_quote(""), "''");
    }

    #[test]
    fn round_trips_through_a_real_shell() {
        for hostile in [
            "1.0; touch /tmp/pwned",
            "it's",
            "$(touch x)",
            "`id`",
            "a\nb",
            "\\'\"",
            "*",
            "--flag with space",
            "",
        ] {
            for quoted in [quote(hostile), shlex_quote(hostile)] {
                let out = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(format!("printf '%s' {quoted}"))
                    .output()
                    .unwrap();
                assert_eq!(String::from_utf8_lossy(&out.stdout), hostile, "{quoted}");
            }
        }
    }

    #[test]
    fn env_names() {
        assert!(is_env_name("HF_MODEL"));
        assert!(is_env_name("TT_MESH_SHAPE"));
        assert!(is_env_name("_x1"));
        assert!(!is_env_name("1X"));
        assert!(!is_env_name("A-B"));
        assert!(!is_env_name("A;B"));
        assert!(!is_env_name(""));
    }
}
