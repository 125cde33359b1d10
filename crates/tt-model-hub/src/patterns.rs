//! `allow_patterns` / `ignore_patterns` with the semantics of Python `huggingface_hub`:
//! shell-style `fnmatch` (the workspace's one matcher, [`tt_model_manifest::glob`], where `*`
//! also crosses `/`), and a pattern ending in `/` means "everything under".

/// The workspace's one wildcard matcher: Python's `fnmatch.fnmatchcase`, as `huggingface_hub`
/// applies it.
pub use tt_model_manifest::glob::fnmatch;

/// Keep `path` when it matches any allow pattern (or there are none) and no ignore pattern.
pub fn is_selected(path: &str, allow: &[String], ignore: &[String]) -> bool {
    let allowed = allow.is_empty() || allow.iter().any(|p| fnmatch(path, &dir_wildcard(p)));
    allowed && !ignore.iter().any(|p| fnmatch(path, &dir_wildcard(p)))
}

/// The Hub's one addition to `fnmatch`: `dir/` means everything under `dir/`.
fn dir_wildcard(p: &str) -> String {
    if p.ends_with('/') {
        format!("{p}*")
    } else {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn allow_and_ignore_combine() {
        let allow = s(&["*.json", "tokenizer/"]);
        let ignore = s(&["secret*"]);
        assert!(is_selected("config.json", &allow, &ignore));
        assert!(is_selected("tokenizer/vocab.txt", &allow, &ignore));
        assert!(!is_selected("secret.json", &allow, &ignore));
        assert!(!is_selected("model.bin", &allow, &ignore));
        assert!(is_selected("model.bin", &[], &[]));
        assert!(!is_selected("original/x.pth", &[], &s(&["original/"])));
        // `*` crosses `/`, as in Python: a nested shard is selected by `*.safetensors`.
        assert!(is_selected(
            "a/b/model.safetensors",
            &s(&["*.safetensors"]),
            &[]
        ));
    }
}
