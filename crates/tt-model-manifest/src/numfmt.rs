//! Numbers as people read them in cards and boot summaries: the one formatter of the
//! workspace (the model card's context length, the boot log's token counts).

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

#[cfg(test)]
mod tests {
    use super::group_thousands;

    #[test]
    fn groups_by_three_from_the_right() {
        assert_eq!(group_thousands(0), "0");
        assert_eq!(group_thousands(512), "512");
        assert_eq!(group_thousands(1000), "1,000");
        assert_eq!(group_thousands(131_072), "131,072");
        assert_eq!(group_thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}
