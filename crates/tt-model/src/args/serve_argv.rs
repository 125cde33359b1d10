//! serve's own options wherever they stand, as the original's click command parses them
//! (`ignore_unknown_options`): an option serve does not know is passed through to the server
//! and parsing goes on, so `serve X --max-tokenz 5 --port 9` passes `--max-tokenz 5` and
//! serves on port 9. clap alone cannot do this (once its passthrough list takes a hyphenated
//! value, every later argument is taken as one too), so [`reorder`] moves serve's own
//! arguments in front of a `--` and the passed-through ones behind it before clap parses.
//!
//! What goes where, as click decides it:
//! - an option serve knows is serve's, with its value (`--port 9`, `--port=9`, `--print k8s`);
//! - any other option after the target is passed through, as one token (`--max-tokenz=5`);
//! - any other word after the target is passed through in its place, so the value of a
//!   passed-through option stays right behind it (`--max-tokenz 5`);
//! - everything after `--` is passed through as it is;
//! - before the target nothing moves: an unknown option there stays clap's usage error.
//!
//! [`near_misses`] names the passed-through options that look like a misspelt serve option
//! (`--replica` for `--replicas`), for a warning.

use std::collections::HashMap;
use std::ffi::OsString;

/// How many values an option takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    /// A flag.
    Nothing,
    /// Exactly one, the next argument when not attached with `=`.
    One,
    /// Zero or one: the next argument unless it looks like an option (`--print [k8s]`).
    Optional,
}

/// serve's options (its own and the global ones), by long and short name.
#[derive(Debug, Default)]
struct Options {
    long: HashMap<String, Takes>,
    short: HashMap<char, Takes>,
    /// Visible long names, the candidates of a did-you-mean.
    visible: Vec<String>,
}

/// serve's options from the parser's own definition, so a new option needs no change here.
fn serve_options(cmd: &clap::Command) -> Option<Options> {
    let mut cmd = cmd.clone();
    // Building propagates the global options and adds `--help` to every subcommand.
    cmd.build();
    let serve = cmd.find_subcommand("serve")?;
    let mut out = Options::default();
    for arg in serve.get_arguments().filter(|a| !a.is_positional()) {
        let takes = if !arg.get_action().takes_values() {
            Takes::Nothing
        } else if arg.get_num_args().is_some_and(|n| n.min_values() == 0) {
            Takes::Optional
        } else {
            Takes::One
        };
        for long in arg.get_long_and_visible_aliases().into_iter().flatten() {
            out.long.insert(long.to_string(), takes);
            if !arg.is_hide_set() {
                out.visible.push(long.to_string());
            }
        }
        for short in arg.get_short_and_visible_aliases().into_iter().flatten() {
            out.short.insert(short, takes);
        }
    }
    Some(out)
}

/// Where `serve` stands in `argv`: the first word after the global options.
fn serve_index(argv: &[OsString]) -> Option<usize> {
    let first = argv
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| !a.to_string_lossy().starts_with('-') || a.as_os_str() == "--")?;
    (first.1 == "serve").then_some(first.0)
}

/// serve's arguments split into its own (the target among them) and the passed-through ones;
/// `None` leaves them as they are (no target before a `--`).
fn split(rest: &[OsString], opts: &Options) -> Option<(Vec<OsString>, Vec<OsString>)> {
    let (mut own, mut through) = (Vec::new(), Vec::new());
    let mut target_seen = false;
    let mut i = 0;
    while i < rest.len() {
        let arg = &rest[i];
        let next = rest.get(i + 1);
        i += 1;
        let Some(s) = arg.to_str() else {
            // Not UTF-8: never an option name, so a word.
            if target_seen {
                through.push(arg.clone());
            } else {
                own.push(arg.clone());
                target_seen = true;
            }
            continue;
        };
        let takes = if s == "--" {
            if !target_seen {
                return None;
            }
            through.extend(rest[i..].iter().cloned());
            break;
        } else if let Some(long) = s.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, _)) => (n, true),
                None => (long, false),
            };
            opts.long
                .get(name)
                .map(|t| if attached { Takes::Nothing } else { *t })
        } else if let Some(shorts) = s.strip_prefix('-').filter(|s| !s.is_empty()) {
            short_cluster(shorts, opts)
        } else {
            // A word: the target, then the passed-through options' values and arguments.
            if target_seen {
                through.push(arg.clone());
            } else {
                own.push(arg.clone());
                target_seen = true;
            }
            continue;
        };
        match takes {
            Some(takes) => {
                own.push(arg.clone());
                let value = match (takes, next) {
                    (Takes::One, Some(v)) => Some(v),
                    (Takes::Optional, Some(v)) if !v.to_string_lossy().starts_with('-') => Some(v),
                    _ => None,
                };
                if let Some(v) = value {
                    own.push(v.clone());
                    i += 1;
                }
            }
            // Before the target an unknown option stays where clap reports it.
            None if !target_seen => own.push(arg.clone()),
            None => through.push(arg.clone()),
        }
    }
    Some((own, through))
}

/// `-abc`: serve's when every letter is one of its short options (a value-taking one only
/// last); what it then takes is the last letter's.
fn short_cluster(shorts: &str, opts: &Options) -> Option<Takes> {
    let letters: Vec<char> = shorts.chars().collect();
    let (last, rest) = letters.split_last()?;
    let all_flags = rest
        .iter()
        .all(|c| opts.short.get(c) == Some(&Takes::Nothing));
    all_flags.then(|| opts.short.get(last).copied()).flatten()
}

/// `argv` with serve's own arguments first and the passed-through ones after a `--`; any other
/// command's argv is returned as it is.
pub fn reorder(cmd: &clap::Command, argv: Vec<OsString>) -> Vec<OsString> {
    let Some(at) = serve_index(&argv) else {
        return argv;
    };
    let Some(opts) = serve_options(cmd) else {
        return argv;
    };
    let Some((own, through)) = split(&argv[at + 1..], &opts) else {
        return argv;
    };
    let mut out: Vec<OsString> = argv[..=at].to_vec();
    out.extend(own);
    if !through.is_empty() {
        out.push("--".into());
        out.extend(through);
    }
    out
}

/// Optimal string alignment distance: edits, with a swap of two neighbours as one.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

/// For each passed-through `--option` that is one edit from a serve option (two for names of 8
/// letters or more), that option: `(given, meant)`. A real server flag is seldom that close to
/// one of serve's, and a warning costs nothing when it is.
pub fn near_misses(cmd: &clap::Command, passthrough: &[OsString]) -> Vec<(String, String)> {
    let Some(opts) = serve_options(cmd) else {
        return Vec::new();
    };
    passthrough
        .iter()
        .filter_map(|a| a.to_str())
        .filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split_once('=').map_or(a, |(n, _)| n))
        .filter(|name| !name.is_empty() && !opts.long.contains_key(*name))
        .filter_map(|name| {
            opts.visible
                .iter()
                .map(|known| (distance(name, known), known))
                .filter(|(d, known)| *d <= if known.len() >= 8 { 2 } else { 1 })
                .min()
                .map(|(_, known)| (format!("--{name}"), format!("--{known}")))
        })
        .collect()
}

/// The warning for one near miss.
pub fn near_miss_warning(given: &str, meant: &str) -> String {
    format!(
        "{given} is not a serve option: it is passed through to the server. Did you mean {meant}?"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn reordered(v: &[&str]) -> Vec<String> {
        reorder(&crate::args::command(), os(v))
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn options_come_from_the_parser() {
        let o = serve_options(&crate::args::command()).unwrap();
        assert_eq!(o.long["port"], Takes::One);
        assert_eq!(o.long["print"], Takes::Optional);
        assert_eq!(o.long["detach"], Takes::Nothing);
        assert_eq!(o.long["replicas"], Takes::One, "the fleet's options too");
        assert_eq!(o.long["verbose"], Takes::Nothing, "global options too");
        assert_eq!(o.long["help"], Takes::Nothing);
        assert_eq!(o.short[&'v'], Takes::Nothing);
        assert!(o.long.contains_key("network") && !o.visible.iter().any(|v| v == "network"));
    }

    #[test]
    fn own_options_after_a_passed_through_one_are_serves() {
        assert_eq!(
            reordered(&[
                "tt-model",
                "serve",
                "X",
                "--print",
                "k8s",
                "--replica",
                "3",
                "--image",
                "REF"
            ]),
            [
                "tt-model",
                "serve",
                "X",
                "--print",
                "k8s",
                "--image",
                "REF",
                "--",
                "--replica",
                "3"
            ]
        );
    }

    #[test]
    fn a_passed_through_value_stays_with_its_option() {
        assert_eq!(
            reordered(&["tt-model", "serve", "X", "--max-tokenz", "5", "--port", "9"]),
            [
                "tt-model",
                "serve",
                "X",
                "--port",
                "9",
                "--",
                "--max-tokenz",
                "5"
            ]
        );
        assert_eq!(
            reordered(&[
                "tt-model",
                "serve",
                "X",
                "--max-tokenz=5",
                "--port=9",
                "-x",
                "-1"
            ]),
            [
                "tt-model",
                "serve",
                "X",
                "--port=9",
                "--",
                "--max-tokenz=5",
                "-x",
                "-1"
            ]
        );
    }

    #[test]
    fn after_a_double_dash_everything_is_passed_through() {
        assert_eq!(
            reordered(&[
                "tt-model", "serve", "X", "--a", "--", "--detach", "--port", "9"
            ]),
            [
                "tt-model", "serve", "X", "--", "--a", "--detach", "--port", "9"
            ]
        );
    }

    #[test]
    fn an_option_value_is_never_the_target() {
        assert_eq!(
            reordered(&[
                "tt-model", "-v", "serve", "--port", "9", "X", "--seed", "1", "-v"
            ]),
            [
                "tt-model", "-v", "serve", "--port", "9", "X", "-v", "--", "--seed", "1"
            ]
        );
        // `--print` takes a value only when one follows that is not an option.
        assert_eq!(
            reordered(&["tt-model", "serve", "X", "--print", "--seed", "1"]),
            ["tt-model", "serve", "X", "--print", "--", "--seed", "1"]
        );
    }

    #[test]
    fn other_commands_and_unknown_options_before_the_target_are_untouched() {
        for argv in [
            &["tt-model", "curl", "hi", "--max-tokens", "8", "--print"][..],
            &["tt-model", "serve", "--bogus", "X", "--port", "9"],
            &["tt-model", "serve", "--", "X", "--port", "9"],
            &["tt-model", "--verbose"],
        ] {
            assert_eq!(reordered(argv), *argv);
        }
    }

    #[test]
    fn near_misses_name_serves_option() {
        let cmd = crate::args::command();
        let got = near_misses(
            &cmd,
            &os(&[
                "--replica",
                "3",
                "--prot=9",
                "--max-num-seqs",
                "4",
                "--no-wieghts",
                "--host",
                "--dtype",
                "--seed",
            ]),
        );
        let got: Vec<(&str, &str)> = got.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        assert_eq!(
            got,
            [
                ("--replica", "--replicas"),
                ("--prot", "--port"),
                ("--no-wieghts", "--no-weights")
            ]
        );
    }

    fn serve_args(v: &[&str]) -> crate::args::ServeArgs {
        match crate::args::parse(v).expect("parses").command {
            Some(crate::args::Commands::Serve(s)) => s,
            other => panic!("not serve: {other:?}"),
        }
    }

    fn strings(v: &[OsString]) -> Vec<String> {
        v.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn the_issue_command_line_renders_with_its_image() {
        let s = serve_args(&[
            "tt-model",
            "serve",
            "X",
            "--print",
            "k8s",
            "--replica",
            "3",
            "--image",
            "REF",
        ]);
        assert_eq!(s.print, Some(crate::args::PrintFormat::K8s));
        assert_eq!(s.k8s.image.as_deref(), Some("REF"));
        assert_eq!(s.k8s.replicas, None);
        assert_eq!(strings(&s.passthrough), ["--replica", "3"]);
    }

    #[test]
    fn the_argv_tt_runs_keeps_its_meaning() {
        // tt's `_argv`: `--verbose`, then serve, the id, `--detach`, its flags, the user's rest.
        let s = serve_args(&[
            "tt-model",
            "--verbose",
            "serve",
            "acme/x",
            "--detach",
            "--port",
            "20001",
            "--profile",
            "p150",
            "--max-num-seqs",
            "4",
            "--no-weights",
        ]);
        assert_eq!(s.target, "acme/x");
        assert!(s.detach && s.no_weights);
        assert_eq!((s.port, s.profile.as_deref()), (Some(20001), Some("p150")));
        assert_eq!(strings(&s.passthrough), ["--max-num-seqs", "4"]);
    }

    #[test]
    fn a_value_that_looks_like_an_option_stays_passed_through_after_a_double_dash() {
        let s = serve_args(&["tt-model", "serve", "X", "--seed", "1", "--", "--port", "9"]);
        assert_eq!(s.port, None);
        assert_eq!(strings(&s.passthrough), ["--seed", "1", "--port", "9"]);
    }

    #[test]
    fn distance_counts_a_swap_as_one_edit() {
        assert_eq!(distance("prot", "port"), 1);
        assert_eq!(distance("replica", "replicas"), 1);
        assert_eq!(distance("host", "port"), 2);
        assert_eq!(distance("", "abc"), 3);
    }
}
