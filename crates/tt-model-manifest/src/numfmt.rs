//! Numbers as people read them in cards, boot summaries and progress lines: the one
//! formatter of the workspace (the model card's context length, the boot log's token counts,
//! sizes on disk and on the wire).

/// `131072` → `"131,072"`: digits grouped by thousands with commas.
pub fn group_thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Decimal bytes, one decimal from a kilobyte up: `512 B`, `12.1 MB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1000.0 && i < UNITS.len() - 1 {
        v /= 1000.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::{group_thousands, human_bytes};

    #[test]
    fn bytes_in_decimal_units() {
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1000), "1.0 kB");
        assert_eq!(human_bytes(12_100_000), "12.1 MB");
        assert_eq!(human_bytes(3_500_000_000_000_000), "3500.0 TB");
    }

    #[test]
    fn groups_by_three_from_the_right() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(512), "512");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(131_072), "131,072");
        assert_eq!(group_thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}
