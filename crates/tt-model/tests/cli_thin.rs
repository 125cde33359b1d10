//! The CLI stays thin (issue 42): workflows live in the libraries, so the CLI's own source
//! (outside its unit tests) neither talks to the Hub, a registry or the container engine, nor
//! probes a server or runs a program (`curl`'s use case does), nor writes files or the state
//! root, except in the files listed here, which write an output the user asked for (each says
//! which); and it builds no catch-all `UserError` outside the files listed. A ratchet: a new
//! file that does any of it fails, and so does a listed file that no longer does (take it off
//! the list, so it cannot start again unnoticed).

use std::collections::BTreeSet;
use std::path::Path;

use super::common::repo_root;

/// What counts, by the calls that do it.
const KINDS: &[(&str, &[&str], &[&str])] = &[
    (
        "talks to the Hub or a registry",
        &[
            "HubClient",
            "Downloader",
            "upload::upload",
            "Registry::connect",
            "push_image",
        ],
        &[],
    ),
    ("opens the container engine", &["host::engine()"], &[]),
    (
        "probes a server or runs a program",
        &[
            "openai::get",
            "openai::routes",
            "openai::list_models",
            "Command::new",
        ],
        &[],
    ),
    (
        "builds a catch-all UserError (refuse with the library's LocalError::Refused)",
        &["UserError("],
        &[
            // The type's declaration.
            "lib.rs",
            // `rm --all` without a terminal to confirm on: the CLI's own question.
            "commands/rm.rs",
        ],
    ),
    (
        "writes files or the state root",
        &[
            "std::fs::write",
            "std::fs::rename",
            "std::fs::remove_file",
            "std::fs::remove_dir_all",
            "std::fs::create_dir_all",
            "std::fs::copy",
            "local.root()",
        ],
        &[
            // The image a text-to-image answer carries, where the user can open it.
            "commands/curl.rs",
            // The schema file the user named.
            "commands/schema.rs",
        ],
    ),
];

/// The `.rs` files under `dir`, relative to `root`, with their text up to the first
/// `#[cfg(test)]` (unit tests may do anything).
fn sources(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.push((rel, code.to_string()));
        }
    }
}

#[test]
fn only_the_listed_cli_files_still_do_a_librarys_work() {
    let src = repo_root().join("crates/tt-model/src");
    let mut files = Vec::new();
    sources(&src, &src, &mut files);
    assert!(
        files.len() > 20,
        "read {} files under {}",
        files.len(),
        src.display()
    );
    let mut problems = Vec::new();
    for (what, needles, allowed) in KINDS {
        let doing: BTreeSet<&str> = files
            .iter()
            .filter(|(_, code)| needles.iter().any(|n| code.contains(n)))
            .map(|(rel, _)| rel.as_str())
            .collect();
        let allowed: BTreeSet<&str> = allowed.iter().copied().collect();
        for f in doing.difference(&allowed) {
            problems.push(format!(
                "{f} {what}: move that work into a library use case (tt-model-local)"
            ));
        }
        for f in allowed.difference(&doing) {
            problems.push(format!(
                "{f} no longer {what}: take it off this test's list"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
