//! POSIX shell quoting: how every authored value reaches a generated script.

/// Quotes `s` as one POSIX shell word. Words made only of characters no shell treats
/// specially stay bare (readable scripts); anything else is single-quoted, with embedded
/// single quotes written as `'\''`.
pub fn quote(s: &str) -> String {
    let safe = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(c, '_' | '@' | '%' | '+' | '=' | ':' | ',' | '.' | '/' | '-')
        });
    if safe {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
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
        assert_eq!(quote(""), "''");
        assert_eq!(quote("1.0; touch /tmp/pwned"), "'1.0; touch /tmp/pwned'");
        assert_eq!(quote("it's"), r"'it'\''s'");
        assert_eq!(quote("$(id)"), "'$(id)'");
        assert_eq!(quote("a\nb"), "'a\nb'");
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
        ] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("printf '%s' {}", quote(hostile)))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), hostile);
        }
    }

    #[test]
    fn env_names() {
        assert!(is_env_name("HF_MODEL"));
        assert!(is_env_name("_x1"));
        assert!(!is_env_name("1X"));
        assert!(!is_env_name("A-B"));
        assert!(!is_env_name("A;B"));
        assert!(!is_env_name(""));
    }
}
