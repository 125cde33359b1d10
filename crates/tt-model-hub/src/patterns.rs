//! `allow_patterns` / `ignore_patterns` with the semantics of Python `huggingface_hub`:
//! shell-style `fnmatch` (`*` also crosses `/`), and a pattern ending in `/` means "everything under".

/// Keep `path` when it matches any allow pattern (or there are none) and no ignore pattern.
pub fn is_selected(path: &str, allow: &[String], ignore: &[String]) -> bool {
    let allowed = allow.is_empty() || allow.iter().any(|p| fnmatch(path, &dir_wildcard(p)));
    allowed && !ignore.iter().any(|p| fnmatch(path, &dir_wildcard(p)))
}

fn dir_wildcard(p: &str) -> String {
    if p.ends_with('/') {
        format!("{p}*")
    } else {
        p.to_string()
    }
}

/// Python's `fnmatch.fnmatchcase`: `*`, `?`, `[seq]`, `[!seq]`; a malformed `[` matches literally.
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    let n: Vec<char> = name.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    matches(&n, &p)
}

fn matches(n: &[char], p: &[char]) -> bool {
    // Iterative wildcard matching with backtracking to the last '*'.
    let (mut ni, mut pi) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    ni += 1;
                    pi += 1;
                    continue;
                }
                '[' => {
                    if let Some((ok, len)) = class(&p[pi..], n[ni]) {
                        if ok {
                            ni += 1;
                            pi += len;
                            continue;
                        }
                    } else if n[ni] == '[' {
                        ni += 1;
                        pi += 1;
                        continue;
                    }
                }
                c if c == n[ni] => {
                    ni += 1;
                    pi += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// Match `c` against the class at the start of `p` (which begins with '[').
/// Returns (matched, pattern length) or `None` if the class is unterminated.
fn class(p: &[char], c: char) -> Option<(bool, usize)> {
    let mut i = 1;
    let negate = matches!(p.get(i), Some('!'));
    if negate {
        i += 1;
    }
    let start = i;
    let mut hit = false;
    while i < p.len() {
        if p[i] == ']' && i > start {
            return Some((hit != negate, i + 1));
        }
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                hit = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                hit = true;
            }
            i += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn star_crosses_slashes_like_python_fnmatch() {
        assert!(fnmatch("a/b/model.safetensors", "*.safetensors"));
        assert!(fnmatch("config.json", "*.json"));
        assert!(!fnmatch("config.json", "*.bin"));
        assert!(fnmatch(
            "model-00001-of-00002.safetensors",
            "model-?????-of-*.safetensors"
        ));
        assert!(fnmatch("x1", "x[0-9]"));
        assert!(!fnmatch("xa", "x[0-9]"));
        assert!(fnmatch("xa", "x[!0-9]"));
        assert!(fnmatch("[x", "[x"));
        assert!(fnmatch("", "*"));
        assert!(!fnmatch("", "?"));
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
    }
}
