//! One model of the manifest (issue 42): the package crate reads the manifest's own types (or
//! their resolved forms, declared in the manifest crate) and declares no second copy of one.
//! A struct here whose fields are mostly a manifest type's fields is such a copy: a new
//! manifest field would have to be added twice. A ratchet: a new copy fails, and so does a
//! listed struct that no longer looks like one (take it off the list).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Package structs that share fields with a manifest type by what they are, not as copies.
const NOT_COPIES: &[(&str, &str)] = &[
    (
        "PackageSpec",
        "the pipeline's input: every field is a manifest type (resolved) or derived from one",
    ),
    (
        "ProfileSummary",
        "derived: each profile merged with `serve`, the card's profile table",
    ),
];

/// The `.rs` files under `dir` with their text.
fn rust_files(dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// `struct Name { field: … }` declarations outside unit tests, by name: their field names.
fn structs(texts: &[String], out: &mut BTreeMap<String, BTreeSet<String>>) {
    for text in texts {
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        let mut rest = code;
        while let Some(at) = rest.find("struct ") {
            let line_start = rest[..at].rfind('\n').map_or(0, |i| i + 1);
            let declares = matches!(
                rest[line_start..at].trim(),
                "" | "pub" | "pub(crate)" | "pub(super)"
            );
            rest = &rest[at + "struct ".len()..];
            if !declares {
                continue; // prose or a string that mentions a struct
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let (Some(open), semi) = (rest.find('{'), rest.find(';')) else {
                continue;
            };
            if name.is_empty() || semi.is_some_and(|s| s < open) {
                continue; // a tuple or unit struct
            }
            let body = &rest[open + 1..];
            let mut depth = 1;
            let end = body
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(body.len(), |(i, _)| i);
            let fields = body[..end]
                .lines()
                .map(str::trim)
                .filter(|l| !l.starts_with("//") && !l.starts_with('#'))
                .filter_map(|l| {
                    let l = l.strip_prefix("pub ").unwrap_or(l);
                    let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
                    let (field, _) = l.split_once(':')?;
                    field
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_')
                        .then(|| field.to_string())
                })
                .filter(|f| !f.is_empty())
                .collect();
            out.insert(name, fields);
        }
    }
}

/// The manifest's key lists written out (`CARD_KEYS = &["description", …]`), by name: the
/// blocks whose struct a macro declares are known by these.
fn key_lists(texts: &[String], out: &mut BTreeMap<String, BTreeSet<String>>) {
    for text in texts {
        for (at, _) in text.match_indices("_KEYS: &[&str] = &[") {
            let name_start = text[..at].rfind(' ').map_or(0, |i| i + 1);
            let list = &text[at..];
            let list = &list[list.find("= &[").unwrap() + "= &[".len()..];
            let list = &list[..list.find(']').unwrap_or(list.len())];
            let keys = list
                .lines()
                .map(|l| l.split("//").next().unwrap_or_default())
                .flat_map(|l| l.split(','))
                .map(|k| k.trim().trim_matches('"').to_string())
                .filter(|k| !k.is_empty())
                .collect();
            out.insert(format!("{}_KEYS", &text[name_start..at]), keys);
        }
    }
}

#[test]
fn the_package_crate_declares_no_copy_of_a_manifest_type() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let (mut manifest_src, mut package_src) = (Vec::new(), Vec::new());
    rust_files(&crates.join("tt-model-manifest/src"), &mut manifest_src);
    rust_files(&crates.join("tt-model-package/src"), &mut package_src);
    let mut manifest = BTreeMap::new();
    structs(&manifest_src, &mut manifest);
    key_lists(&manifest_src, &mut manifest);
    let mut package = BTreeMap::new();
    structs(&package_src, &mut package);
    assert!(
        manifest.contains_key("VllmPluginRuntime")
            && manifest
                .get("CARD_KEYS")
                .is_some_and(|k| k.contains("limitations"))
            && package.contains_key("PackageSpec"),
        "read the structs: {:?} / {:?}",
        manifest.keys().collect::<Vec<_>>(),
        package.keys().collect::<Vec<_>>()
    );
    let mut copies = BTreeSet::new();
    let mut problems = Vec::new();
    for (name, fields) in &package {
        for (theirs, their_fields) in &manifest {
            let shared: Vec<&String> = fields.intersection(their_fields).collect();
            let smaller = fields.len().min(their_fields.len());
            if shared.len() >= 3 && shared.len() * 2 >= smaller {
                copies.insert(name.as_str());
                if !NOT_COPIES.iter().any(|(n, _)| n == name) {
                    problems.push(format!(
                        "{name} repeats {theirs}'s fields {shared:?}: read the manifest's type \
                         (or its resolved form in tt_model_manifest::resolved)"
                    ));
                }
            }
        }
    }
    for (name, why) in NOT_COPIES {
        if !copies.contains(name) {
            problems.push(format!(
                "{name} ({why}) no longer shares a manifest type's fields: take it off the list"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
