//! The decisions `push`, `publish` and `unpublish` make before touching the Hub (reference
//! §1.4, §5.2, §5.6), as pure functions: which repo, what visibility, whether the card may go
//! into the catalog, what the catalog listing becomes, and which files a package repo holds.

use tt_model_manifest::WireManifest;

/// The top-level files a package repo carries besides `code/**` and `image/**`.
pub const TOP_FILES: &[&str] = &[
    "README.md",
    tt_model_manifest::wire::MANIFEST_NAME,
    "requirements.lock",
];
/// The folders whose stale files a push prunes (after, or with, the commit that replaces them).
pub const PRUNED: &[&str] = &["code/", "image/"];

/// What the visibility flags ask for: `Some(true)` `--private`, `Some(false)` `--public` or
/// `--publish`, `None` neither.
pub fn requested_private(private: bool, public: bool, publish: bool) -> Option<bool> {
    if private {
        Some(true)
    } else if public || publish {
        Some(false)
    } else {
        None
    }
}

/// What happens to the repo's visibility.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// A new repo: private unless `--public`/`--publish`.
    Create {
        /// Whether the new repo is private.
        private: bool,
    },
    /// An existing repo, no flag (or the flag matches): left exactly as it is.
    Keep {
        /// Whether the repo is (and stays) private.
        private: bool,
    },
    /// An existing repo whose visibility the flag changes (announced).
    Change {
        /// Whether the repo becomes private (`false`: public).
        private: bool,
    },
}

/// The tri-state rule (`_ensure_repo`): `existing` is the repo's current privacy, if it exists.
pub fn visibility(existing: Option<bool>, requested: Option<bool>) -> Visibility {
    match (existing, requested) {
        (None, r) => Visibility::Create {
            private: r.unwrap_or(true),
        },
        (Some(now), None) => Visibility::Keep { private: now },
        (Some(now), Some(want)) if now == want => Visibility::Keep { private: now },
        (Some(_), Some(want)) => Visibility::Change { private: want },
    }
}

/// What the catalog listing becomes with this push.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// `--publish`: listed.
    List,
    /// Listed before and not made private: kept listed (a re-upload of the README would
    /// otherwise silently delist it).
    Keep,
    /// Listed before and pushed `--private`: delisted.
    Delist,
    /// Not listed, not asked to be.
    Unlisted,
}

impl Listing {
    /// Whether the pushed README carries the catalog tag.
    pub fn listed(self) -> bool {
        matches!(self, Listing::List | Listing::Keep)
    }
}

/// What the catalog listing becomes: `listed_before` is whether the card carried the catalog
/// tag before this push, `publish` and `private` are the `--publish` and `--private` flags.
pub fn listing(listed_before: bool, publish: bool, private: bool) -> Listing {
    match (listed_before, publish, private) {
        (_, true, _) => Listing::List,
        (true, false, true) => Listing::Delist,
        (true, false, false) => Listing::Keep,
        (false, false, _) => Listing::Unlisted,
    }
}

/// The card sections the catalog requires that `wire` lacks (`card.performance`,
/// `card.limitations`); a manifest with no card lacks both.
pub fn card_gaps(wire: &WireManifest) -> Vec<&'static str> {
    let card = wire.container.card.as_ref();
    let set = |v: Option<&String>| v.is_some_and(|s| !s.trim().is_empty());
    let mut gaps = Vec::new();
    if !set(card.and_then(|c| c.performance.as_ref())) {
        gaps.push("performance");
    }
    if !set(card.and_then(|c| c.limitations.as_ref())) {
        gaps.push("limitations");
    }
    gaps
}

/// The card gate runs when the push lists the package: `--publish`, or a listed repo pushed
/// without `--private`.
pub fn gate_applies(listing: Listing) -> bool {
    listing.listed()
}

/// The refusal for a card with `gaps`, naming the sections and how to fill them.
pub fn gate_message(repo: &str, gaps: &[&str]) -> String {
    let keys: Vec<String> = gaps.iter().map(|g| format!("card.{g}")).collect();
    format!(
        "{repo} cannot be listed in the catalog: the model card lacks {}; add {} to tt-model.yaml, package again, then push (or push without --publish)",
        gaps.join(" and "),
        keys.join(" and ")
    )
}

/// The target repo: `--repo`, else `built.repo`; checked for the `ns/name` shape.
pub fn target_repo(flag: Option<&str>, wire: &WireManifest) -> Option<String> {
    flag.map(str::to_string).or_else(|| {
        wire.container
            .built
            .as_ref()
            .and_then(|b| b.repo.clone())
            .filter(|r| !r.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_is_tri_state() {
        assert_eq!(visibility(None, None), Visibility::Create { private: true });
        assert_eq!(
            visibility(None, Some(false)),
            Visibility::Create { private: false }
        );
        assert_eq!(
            visibility(Some(false), None),
            Visibility::Keep { private: false }
        );
        assert_eq!(
            visibility(Some(true), None),
            Visibility::Keep { private: true }
        );
        assert_eq!(
            visibility(Some(true), Some(true)),
            Visibility::Keep { private: true }
        );
        assert_eq!(
            visibility(Some(true), Some(false)),
            Visibility::Change { private: false }
        );
        assert_eq!(
            visibility(Some(false), Some(true)),
            Visibility::Change { private: true }
        );
        assert_eq!(requested_private(false, false, true), Some(false));
        assert_eq!(requested_private(false, false, false), None);
    }

    #[test]
    fn listing_is_kept_unless_made_private() {
        assert_eq!(listing(false, true, false), Listing::List);
        assert_eq!(listing(true, false, false), Listing::Keep);
        assert_eq!(listing(true, false, true), Listing::Delist);
        assert_eq!(listing(false, false, true), Listing::Unlisted);
        assert!(gate_applies(Listing::Keep) && gate_applies(Listing::List));
        assert!(!gate_applies(Listing::Delist) && !gate_applies(Listing::Unlisted));
    }

    #[test]
    fn the_gate_names_what_is_missing() {
        let m = gate_message("acme/x", &["performance", "limitations"]);
        assert!(m.contains("lacks performance and limitations"), "{m}");
        assert!(m.contains("card.performance and card.limitations"), "{m}");
    }
}
