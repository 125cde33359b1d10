//! The CLI's contract without an engine: clap's own consistency checks, the help panels and
//! texts (insta snapshots), did-you-mean suggestions, and every `tt-model …` remedy hint the
//! source prints parsing as a real command line.

use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use tt_model::args::{Cli, PANELS, command};

#[test]
fn clap_debug_asserts_pass() {
    Cli::command().debug_assert();
    command().debug_assert();
}

/// The help clap prints for `argv` (plain: `Display` drops the styling), wrapped at a fixed
/// 100 columns so the snapshots do not depend on the terminal (or `COLUMNS`) of the test run.
fn help(argv: &[&str]) -> String {
    let err = command()
        .term_width(100)
        .try_get_matches_from(argv)
        .expect_err("--help ends parsing");
    assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{argv:?}");
    err.render().to_string()
}

fn subcommand_names() -> Vec<String> {
    command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .filter(|n| n != "help")
        .collect()
}

#[test]
fn help_snapshots() {
    insta::assert_snapshot!("help", help(&["tt-model", "--help"]));
    for name in subcommand_names() {
        insta::assert_snapshot!(format!("help_{name}"), help(&["tt-model", &name, "--help"]));
    }
}

#[test]
fn every_command_sits_in_exactly_one_help_panel() {
    let top = help(&["tt-model", "--help"]);
    for (title, _) in PANELS {
        assert!(top.contains(&format!("{title}:")), "{top}");
    }
    assert!(
        !top.contains("Commands:"),
        "no command falls into a generic panel: {top}"
    );
    for name in subcommand_names() {
        let n = PANELS
            .iter()
            .filter(|(_, names)| names.contains(&name.as_str()))
            .count();
        assert_eq!(n, 1, "`{name}` is in {n} panels");
    }
    let listed: usize = PANELS.iter().map(|(_, names)| names.len()).sum();
    assert_eq!(
        listed,
        subcommand_names().len(),
        "a panel names a missing command"
    );
}

fn run(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

#[test]
fn mistyped_commands_and_flags_suggest_the_right_one_and_exit_2() {
    for (argv, tip) in [
        (
            &["serv", "acme/x"][..],
            "similar subcommands exist: 'search', 'serve'",
        ),
        (
            &["pakage", "--container", "x.yaml"][..],
            "similar subcommand exists: 'package'",
        ),
        (&["ps", "--jsno"][..], "similar argument exists: '--json'"),
        (
            &["serve", "--detatch", "acme/x"][..],
            "similar argument exists: '--detach'",
        ),
        (
            &["pull", "--with-weight", "acme/x"][..],
            "similar argument exists: '--with-weights'",
        ),
    ] {
        let o = run(argv);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{argv:?}: {err}");
        assert!(err.contains(tip), "{argv:?}: {err}");
    }
    // Two command names in a row: the original's hint.
    let o = run(&["pull", "serve", "acme/x"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("Did you mean:  tt-model serve acme/x"),
        "{err}"
    );
}

/// Every string literal of a Rust source file, unescaped (`\n`, `\"`, `\\`, and `\` line
/// continuations); comments and char literals are skipped.
fn string_literals(src: &str) -> Vec<String> {
    let c: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < c.len() {
        match c[i] {
            '/' if c.get(i + 1) == Some(&'/') => {
                while i < c.len() && c[i] != '\n' {
                    i += 1;
                }
            }
            '\'' => {
                // '"' and '\"' are chars; a lifetime has no closing quote nearby.
                if c.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else if c.get(i + 1) == Some(&'\\') {
                    i += 2;
                    while i < c.len() && c[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else {
                    i += 1;
                }
            }
            '"' => {
                let raw = i > 0 && (c[i - 1] == 'r' || c[i - 1] == '#');
                let mut s = String::new();
                i += 1;
                while i < c.len() && c[i] != '"' {
                    if c[i] == '\\' && !raw {
                        i += 1;
                        match c.get(i) {
                            Some('n') => s.push('\n'),
                            Some('\n') => {
                                while i + 1 < c.len() && c[i + 1].is_whitespace() {
                                    i += 1;
                                }
                            }
                            Some(&other) => s.push(other),
                            None => {}
                        }
                    } else {
                        s.push(c[i]);
                    }
                    i += 1;
                }
                out.push(s);
                i += 1;
            }
            _ => i += 1,
        }
    }
    out
}

/// The remedy hints in a string: each `tt-model <word>…` that starts the text or follows
/// `: `, `→ ` or `· ` (a hint, not prose like "a tt-model container"), up to the end of its
/// line, a ` · `, a `, ` or a backquote.
fn hints(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("tt-model ") {
        let before = text[..at].trim_end_matches(' ');
        let is_hint = before.is_empty()
            || before.ends_with(':')
            || before.ends_with('→')
            || before.ends_with('·')
            || before.ends_with('\n');
        if !is_hint || !text[at + 9..].starts_with(|c: char| c.is_ascii_lowercase()) {
            continue;
        }
        let rest = &text[at..];
        let end = [
            rest.find('\n'),
            rest.find(" · "),
            rest.find(", "),
            rest.find('`'),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(rest.len());
        out.push(rest[..end].trim_end().to_string());
    }
    out
}

/// A hint with its placeholders filled in: `{…}` and `<…>` with a package id, `N` with a
/// port, and an optional `[…]` tail dropped.
fn fill(hint: &str) -> Vec<String> {
    let mut s = String::new();
    let mut depth = None;
    for ch in hint.chars() {
        match (depth, ch) {
            (None, '{' | '<') => {
                depth = Some(ch);
                s.push_str("acme/demo");
            }
            (Some('{'), '}') | (Some('<'), '>') => depth = None,
            (Some(_), _) => {}
            (None, _) => s.push(ch),
        }
    }
    let s = match s.find(" [") {
        Some(i) => s[..i].to_string(),
        None => s,
    };
    s.split_whitespace()
        .map(|w| {
            if w == "N" {
                "8000".to_string()
            } else {
                w.to_string()
            }
        })
        .collect()
}

fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    walk(&crates.join("tt-model/src"), &mut out);
    // What this machine holds (its refusals' remedies, the boot diagnosis cards' actions) is
    // printed by the CLI's commands too.
    walk(&crates.join("tt-model-local/src"), &mut out);
    out.sort();
    out
}

#[test]
fn hint_extraction_finds_commands_and_skips_prose() {
    assert_eq!(
        hints("stop another model: tt-model ps · tt-model stop <target>"),
        vec!["tt-model ps", "tt-model stop <target>"]
    );
    assert_eq!(
        hints("no tt-model container is running"),
        Vec::<String>::new()
    );
    assert_eq!(
        fill("tt-model serve --port N {target} [server args…]"),
        vec!["tt-model", "serve", "--port", "8000", "acme/demo"]
    );
    assert_eq!(
        string_literals("f(\"a\\n  \\\n   b\", '\"', \"c\") // \"d\""),
        vec!["a\n  b", "c"]
    );
}

#[test]
fn every_remedy_hint_is_a_command_that_parses() {
    let mut checked = 0;
    let mut bad = Vec::new();
    for path in sources() {
        let src = std::fs::read_to_string(&path).unwrap();
        // Unit tests pin texts (including deliberately wrong ones); only the code counts.
        let code = src.split("#[cfg(test)]").next().unwrap_or_default();
        for lit in string_literals(code) {
            for hint in hints(&lit) {
                let argv = fill(&hint);
                checked += 1;
                if let Err(e) = Cli::try_parse_from(&argv) {
                    bad.push(format!(
                        "{}: `{hint}` -> {argv:?}: {}",
                        path.display(),
                        e.render().to_string().lines().next().unwrap_or_default()
                    ));
                }
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} hints found: the scan is broken"
    );
    assert!(
        bad.is_empty(),
        "hints that do not parse:\n{}",
        bad.join("\n")
    );
}
