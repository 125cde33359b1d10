//! Board labels (`p150`, `p300x2`, `n300x4`), mesh presets (`P150x4`, `QB2`, `(2, 2)`) and the
//! chip-count cross-check between them. Pure functions.

/// Chips per board; a trailing revision letter (`p150a`) is tolerated.
pub const BOARDS: &[(&str, u32)] = &[
    ("e150", 1),
    ("n150", 1),
    ("n300", 2),
    ("p100", 1),
    ("p150", 1),
    ("p300", 2),
];

/// The plugin's closed table of `MESH_DEVICE` presets, as `(rows, cols)`.
pub const MESH_PRESETS: &[(&str, (u32, u32))] = &[
    ("N150", (1, 1)),
    ("P100", (1, 1)),
    ("P150", (1, 1)),
    ("P150x2", (1, 2)),
    ("N300", (1, 2)),
    ("P300", (1, 2)),
    ("N150x4", (1, 4)),
    ("P150x4", (1, 4)),
    ("P300x2", (1, 4)),
    ("QB2", (2, 2)),
    ("T3K", (1, 8)),
    ("P150x8", (1, 8)),
    ("TG", (4, 8)),
    ("BH-Galaxy", (4, 8)),
];

/// Box names people write where a board label belongs, with the right label.
const BOX_NAMES: &[(&str, &str)] = &[
    ("qb2", "p300x2"),
    ("t3000", "n300x4"),
    ("t3k", "n300x4"),
    ("quietbox", "p300x2"),
];

/// A parsed board label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hardware {
    /// The board, without revision letter (`p150`).
    pub board: &'static str,
    /// How many boards.
    pub count: u32,
    /// Total chips.
    pub chips: u32,
}

/// Why a board label is refused (the message is the caller's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HardwareError {
    /// Not `<board>[xN]`, or an unknown board; with an optional hint.
    NotALabel {
        /// What the author probably meant (a box or preset name was given).
        hint: Option<String>,
    },
    /// `p150x0`.
    ZeroBoards,
}

/// Parses `<board>[xN]` (case-insensitive, trimmed).
pub fn parse_hardware(label: &str) -> Result<Hardware, HardwareError> {
    let lower = label.trim().to_ascii_lowercase();
    let (board_part, count) = match lower.split_once('x') {
        Some((b, n)) => {
            let n: u32 = n.parse().map_err(|_| not_a_label(label))?;
            (b, n)
        }
        None => (lower.as_str(), 1),
    };
    // <letter><digits>[<revision letter>]
    let mut chars = board_part.chars();
    let Some(first) = chars.next().filter(char::is_ascii_lowercase) else {
        return Err(not_a_label(label));
    };
    let rest: Vec<char> = chars.collect();
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let revision = &rest[digits..];
    if digits == 0 || revision.len() > 1 || !revision.iter().all(char::is_ascii_lowercase) {
        return Err(not_a_label(label));
    }
    let base: String = std::iter::once(first)
        .chain(rest[..digits].iter().copied())
        .collect();
    let Some(&(board, per)) = BOARDS.iter().find(|(b, _)| *b == base) else {
        return Err(not_a_label(label));
    };
    if count == 0 {
        return Err(HardwareError::ZeroBoards);
    }
    Ok(Hardware {
        board,
        count,
        chips: per * count,
    })
}

/// Chips a profile needs: those of its board label, or 1 when it names none or an unknown
/// one (the reader's view; the manifest's own checks refuse a bad label before packaging).
pub fn chips_or_one(label: Option<&str>) -> u32 {
    label
        .and_then(|l| parse_hardware(l).ok())
        .map_or(1, |h| h.chips)
}

fn not_a_label(label: &str) -> HardwareError {
    let trimmed = label.trim();
    let hint = if let Some((_, good)) = BOX_NAMES
        .iter()
        .find(|(b, _)| b.eq_ignore_ascii_case(trimmed))
    {
        Some(format!(
            "'{trimmed}' is a box, not a board label: write '{good}'"
        ))
    } else if MESH_PRESETS
        .iter()
        .any(|(p, _)| p.eq_ignore_ascii_case(trimmed))
    {
        Some(format!(
            "'{trimmed}' is a mesh_device preset, not a board label"
        ))
    } else {
        None
    };
    HardwareError::NotALabel { hint }
}

/// The expected form, for messages.
pub fn hardware_expectation() -> String {
    let boards: Vec<String> = BOARDS.iter().map(|(b, _)| format!("'{b}'")).collect();
    format!(
        "Expected <board>[xN] with board one of [{}] — a T3000 is 'n300x4', a QB2 is 'p300x2'",
        boards.join(", ")
    )
}

/// Parses a mesh preset or a literal `"(rows, cols)"` into `(rows, cols)`.
pub fn parse_mesh(text: &str) -> Option<(u32, u32)> {
    let trimmed = text.trim();
    if let Some((_, shape)) = MESH_PRESETS.iter().find(|(p, _)| *p == trimmed) {
        return Some(*shape);
    }
    let inner = trimmed
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .or_else(|| trimmed.strip_prefix('[').and_then(|s| s.strip_suffix(']')))
        .unwrap_or(trimmed);
    let (r, c) = inner.split_once(',')?;
    let rows: u32 = r.trim().parse().ok()?;
    let cols: u32 = c.trim().trim_end_matches(',').trim().parse().ok()?;
    (rows > 0 && cols > 0).then_some((rows, cols))
}

/// The preset names, for messages and suggestions.
pub fn mesh_preset_names() -> Vec<&'static str> {
    MESH_PRESETS.iter().map(|(p, _)| *p).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn board_labels() {
        assert_eq!(parse_hardware("p150").map(|h| h.chips), Ok(1));
        assert_eq!(parse_hardware(" P150a ").map(|h| h.chips), Ok(1));
        assert_eq!(parse_hardware("p300x2").map(|h| h.chips), Ok(4));
        assert_eq!(parse_hardware("p300cx2").map(|h| h.chips), Ok(4));
        assert_eq!(parse_hardware("n300x4").map(|h| h.chips), Ok(8));
        assert_eq!(parse_hardware("p150x0"), Err(HardwareError::ZeroBoards));
        assert!(matches!(
            parse_hardware("QB2"),
            Err(HardwareError::NotALabel { hint: Some(_) })
        ));
        assert!(matches!(
            parse_hardware("p999"),
            Err(HardwareError::NotALabel { hint: None })
        ));
        assert!(parse_hardware("150").is_err());
        assert!(parse_hardware("p150xx2").is_err());
        assert_eq!(chips_or_one(Some("p300x2")), 4);
        assert_eq!(chips_or_one(Some("QB2")), 1);
        assert_eq!(chips_or_one(None), 1);
    }

    #[test]
    fn meshes() {
        assert_eq!(parse_mesh("P150x4"), Some((1, 4)));
        assert_eq!(parse_mesh("QB2"), Some((2, 2)));
        assert_eq!(parse_mesh("(2, 4)"), Some((2, 4)));
        assert_eq!(parse_mesh("1,1"), Some((1, 1)));
        assert_eq!(parse_mesh("(0, 4)"), None);
        assert_eq!(parse_mesh("p150"), None);
    }
}
