//! The image a cluster pulls: a registry reference pinned by digest, never a tag (a tag can move
//! under a running fleet, and replicas started a day apart would then run different builds).

use crate::FleetError;

/// `sha256:` followed by 64 lowercase hex digits.
fn is_sha256_digest(d: &str) -> bool {
    d.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The reference a fleet runs for a package whose manifest records `container.image`
/// `{registry, repository, digest}`: `<registry>/<repository>@<digest>`. A Hub-carried image
/// (`registry: hf`) or one without a digest is an error naming `image.registry` and `push`.
pub fn pinned_image(
    package: &str,
    registry: &str,
    repository: &str,
    digest: Option<&str>,
) -> Result<String, FleetError> {
    if registry.is_empty() || registry == "hf" {
        return Err(FleetError::NoRegistryImage {
            package: package.to_string(),
        });
    }
    let base = format!("{}/{}", registry.trim_end_matches('/'), repository);
    match digest.filter(|d| !d.is_empty()) {
        Some(d) => {
            let reference = format!("{base}@{d}");
            check_pinned(&reference)?;
            Ok(reference)
        }
        None => Err(FleetError::NoDigest {
            package: package.to_string(),
            reference: base,
        }),
    }
}

/// An explicit reference (`--image`) must end in `@sha256:<64 hex>`.
pub fn check_pinned(reference: &str) -> Result<(), FleetError> {
    match reference.rsplit_once('@') {
        Some((repo, digest)) if !repo.is_empty() && is_sha256_digest(digest) => Ok(()),
        _ => Err(FleetError::NotPinned {
            reference: reference.to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn a_registry_image_with_a_digest_is_pinned() {
        assert_eq!(
            pinned_image("m", "ghcr.io/acme/", "m", Some(D)).unwrap(),
            format!("ghcr.io/acme/m@{D}")
        );
    }

    #[test]
    fn hub_images_and_missing_digests_say_how_to_push() {
        let hub = pinned_image("m", "hf", "m", Some(D))
            .unwrap_err()
            .to_string();
        assert!(
            hub.contains("image.registry") && hub.contains("tt-model push"),
            "{hub}"
        );
        let unbuilt = pinned_image("m", "ghcr.io/acme", "m", None)
            .unwrap_err()
            .to_string();
        assert!(
            unbuilt.contains("ghcr.io/acme/m") && unbuilt.contains("tt-model push"),
            "{unbuilt}"
        );
    }

    #[test]
    fn tags_and_short_digests_are_not_pinned() {
        for bad in [
            "ghcr.io/acme/m:1",
            "ghcr.io/acme/m@sha256:abc",
            &format!("@{D}"),
            "m@sha256:ZZ",
        ] {
            assert!(
                matches!(check_pinned(bad), Err(FleetError::NotPinned { .. })),
                "{bad}"
            );
        }
        assert!(check_pinned(&format!("ghcr.io/acme/m@{D}")).is_ok());
    }
}
