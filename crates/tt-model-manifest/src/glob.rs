//! The one wildcard matcher of the workspace: Python's `fnmatch.fnmatchcase`, which is what
//! `huggingface_hub` applies to `allow_patterns` / `ignore_patterns` and what a shell glob in
//! one path component (`wheels/vllm-*.whl`) means.
//!
//! The rules, all case-sensitive:
//!
//! * `*` matches any run of characters, `/` included (a name, not a path, is what file-system
//!   callers pass, so crossing `/` only matters to the Hub, where Python crosses it too);
//! * `?` matches exactly one character;
//! * `[seq]` matches one character in `seq` (ranges `a-z` allowed), `[!seq]` one not in it;
//!   a `]` right after `[` or `[!` is a member; an unterminated `[` matches a literal `[`;
//! * every other character matches itself.

/// Whether `pattern` has a wildcard character (`*`, `?` or `[`): a path whose last component
/// has one is a glob, not a file name.
pub fn is_pattern(pattern: &str) -> bool {
    pattern.contains(['*', '?', '['])
}

/// Whether `name` matches `pattern` under the rules above.
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    let n: Vec<char> = name.chars().collect();
    let p: Vec<char> = pattern.chars().collect();
    matches(&n, &p)
}

/// Iterative matching that backtracks to the last `*` (linear in practice, no recursion).
fn matches(n: &[char], p: &[char]) -> bool {
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
                '[' => match class(&p[pi..], n[ni]) {
                    Some((true, len)) => {
                        ni += 1;
                        pi += len;
                        continue;
                    }
                    Some((false, _)) => {}
                    None if n[ni] == '[' => {
                        ni += 1;
                        pi += 1;
                        continue;
                    }
                    None => {}
                },
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

/// Matches `c` against the class at the start of `p` (which begins with `[`): whether it
/// matched and the class's length, or `None` when the class is unterminated.
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

    #[test]
    fn star_and_question_mark() {
        assert!(fnmatch("vllm-0.9.1-py3-none-any.whl", "vllm-*.whl"));
        assert!(!fnmatch("vllm_tt-0.1.whl", "vllm-*.whl"));
        assert!(fnmatch("abc", "a?c"));
        assert!(!fnmatch("ac", "a?c"));
        assert!(fnmatch("", "*"));
        assert!(!fnmatch("", "?"));
        assert!(fnmatch("aXbXc", "a*b*c"));
        assert!(!fnmatch("abcd", "a*c"));
    }

    #[test]
    fn star_crosses_slashes_like_python_fnmatch() {
        assert!(fnmatch("a/b/model.safetensors", "*.safetensors"));
        assert!(fnmatch(
            "model-00001-of-00002.safetensors",
            "model-?????-of-*.safetensors"
        ));
    }

    #[test]
    fn classes_ranges_negation_and_a_literal_bracket() {
        assert!(fnmatch("x1", "x[0-9]"));
        assert!(!fnmatch("xa", "x[0-9]"));
        assert!(fnmatch("xa", "x[!0-9]"));
        assert!(fnmatch("x]", "x[]]"));
        assert!(
            fnmatch("[x", "[x"),
            "an unterminated class is a literal `[`"
        );
        assert!(!fnmatch("X.whl", "x.whl"), "case-sensitive");
    }

    #[test]
    fn what_counts_as_a_pattern() {
        assert!(is_pattern("w/*.whl"));
        assert!(is_pattern("a?.whl"));
        assert!(is_pattern("a[12].whl"));
        assert!(!is_pattern("w/x-1.0-py3-none-any.whl"));
    }
}
