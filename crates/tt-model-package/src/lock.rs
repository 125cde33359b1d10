//! `requirements.lock` from a frozen environment.

/// PEP 503 name normalisation: lowercase, runs of `-_.` become `-`.
pub fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('-') {
                out.push('-');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// Turns `name==version<TAB>local|index` lines into a sorted lock: local-origin
/// distributions, `excludes` and repeated names are dropped.
pub fn lock_from_freeze(freeze: &str, excludes: &[&str]) -> String {
    let mut pins: std::collections::BTreeMap<String, String> = Default::default();
    for line in freeze.lines() {
        let Some((pin, origin)) = line.split_once('\t') else {
            continue;
        };
        if origin.trim() != "index" {
            continue;
        }
        let Some((name, _)) = pin.split_once("==") else {
            continue;
        };
        let key = normalize(name);
        if excludes.iter().any(|e| normalize(e) == key) {
            continue;
        }
        pins.entry(key).or_insert_with(|| pin.trim().to_string());
    }
    let mut out = String::new();
    for pin in pins.values() {
        out.push_str(pin);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freeze_to_lock() {
        let freeze = "Torch==2.7.1+cpu\tindex\nttnn==0.1\tindex\nmy_model==0.0\tlocal\nfastapi==0.115\tindex\nFastAPI==0.99\tindex\ngarbage\n";
        assert_eq!(
            lock_from_freeze(freeze, &["ttnn"]),
            "fastapi==0.115\nTorch==2.7.1+cpu\n"
        );
        assert_eq!(normalize("Vllm_TT.plugin"), "vllm-tt-plugin");
    }
}
