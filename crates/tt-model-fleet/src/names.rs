//! Kubernetes names and label values from package and profile names, which may hold characters
//! (`.`, `_`, capitals) that a Service name (an RFC 1035 label) refuses.

/// The longest object name or label value Kubernetes takes.
const MAX: usize = 63;

/// A lowercase RFC 1035 label: `[a-z0-9-]`, at most 63 characters, no dash at either end.
pub(crate) fn dns_label(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect();
    trim(&mapped, |c| c == '-')
}

/// A label value: `[A-Za-z0-9._-]`, at most 63 characters, alphanumeric at both ends.
pub(crate) fn label_value(s: &str) -> String {
    let mapped: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    trim(&mapped, |c| !c.is_ascii_alphanumeric())
}

fn trim(s: &str, strip: impl Fn(char) -> bool + Copy) -> String {
    let s = s.trim_matches(strip);
    let cut: String = s.chars().take(MAX).collect();
    cut.trim_end_matches(strip).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_kubernetes_rules() {
        assert_eq!(
            dns_label("tt-model-gr00t-n1.6-3b-p150-rs-default"),
            "tt-model-gr00t-n1-6-3b-p150-rs-default"
        );
        assert_eq!(dns_label("-Ab_c-"), "ab-c");
        assert_eq!(
            label_value("gr00t-n1.6-3b-p150-rs"),
            "gr00t-n1.6-3b-p150-rs"
        );
        assert_eq!(label_value("_x/y."), "x-y");
        let long = "a".repeat(62) + "-b";
        assert_eq!(dns_label(&long), "a".repeat(62));
    }
}
