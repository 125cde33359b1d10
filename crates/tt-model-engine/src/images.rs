//! Image facts, tags and removal, `import` of a root filesystem tar (`docker import`), and
//! whether the loaded image is the build a package records ([`judge`]).

use std::collections::BTreeMap;

use bollard::query_parameters::{CreateImageOptions, RemoveImageOptions, TagImageOptions};
use bytes::Bytes;
use futures_util::{Stream, StreamExt};

use crate::client::Client;
use crate::error::EngineError;

/// What we read back about an image.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ImageFacts {
    /// The image id, `sha256:<64 hex>`.
    pub id: String,
    /// Tags pointing at it.
    pub repo_tags: Vec<String>,
    /// Registry digests (`repo@sha256:…`), empty for local-only images.
    pub repo_digests: Vec<String>,
    /// Image labels.
    pub labels: BTreeMap<String, String>,
    /// The default user (`tt`, `1000`, or empty for root).
    pub user: String,
    /// The image's environment, `K=V`.
    pub env: Vec<String>,
    /// Size in bytes.
    pub size: i64,
}

impl ImageFacts {
    /// The first 12 hex digits of the id, as used in our tags.
    pub fn short_id(&self) -> &str {
        let hex = self.id.strip_prefix("sha256:").unwrap_or(&self.id);
        &hex[..hex.len().min(12)]
    }

    /// The best pinned reference for provenance: a registry digest if the image has one,
    /// else the local image id.
    pub fn pinned_ref(&self) -> String {
        self.repo_digests
            .first()
            .cloned()
            .unwrap_or_else(|| self.id.clone())
    }

    /// The registry digest (`repo@sha256:…`) this image has in the repository `reference`
    /// names (its tag or digest ignored; `docker.io/library/` spelled or not), if any: an
    /// image pushed to or pulled from several repositories has one digest for each, and only
    /// the one of the repository asked about pins that reference.
    pub fn digest_in_repository_of(&self, reference: &str) -> Option<&str> {
        let target = crate::pull::pull_target(reference);
        let wanted = target
            .from_image
            .split_once('@')
            .map_or(target.from_image.as_str(), |(r, _)| r);
        let wanted = familiar_repository(wanted);
        self.repo_digests
            .iter()
            .find(|d| {
                d.split_once('@')
                    .is_some_and(|(r, _)| familiar_repository(r) == wanted)
            })
            .map(String::as_str)
    }
}

/// A Docker Hub repository as the engine lists it (`busybox`, `org/app`): `docker.io/` and
/// `library/` dropped, so that a reference spelled in full matches the engine's short form.
fn familiar_repository(repository: &str) -> &str {
    let short = repository
        .strip_prefix("docker.io/")
        .or_else(|| repository.strip_prefix("index.docker.io/"))
        .unwrap_or(repository);
    short.strip_prefix("library/").unwrap_or(short)
}

/// The loaded image compared with the build a package records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageState {
    /// Nothing is loaded under the reference.
    Missing,
    /// The loaded image is the recorded build (or the package records no digest).
    Matches(ImageFacts),
    /// Another build is loaded under the reference.
    Different {
        /// What is loaded under the reference.
        facts: ImageFacts,
        /// The image digest the package records.
        expected: String,
    },
}

/// Judges the image loaded under a package's reference. `expected` is the package's recorded
/// image digest; `known_loaded_id` is the id this engine gave that same digest when it was
/// last loaded here (from the installed-packages database), since a containerd image store
/// names an image by its manifest digest where the classic store uses the config digest.
pub fn judge(
    loaded: Option<ImageFacts>,
    expected: Option<&str>,
    known_loaded_id: Option<&str>,
) -> ImageState {
    let Some(facts) = loaded else {
        return ImageState::Missing;
    };
    match expected {
        None => ImageState::Matches(facts),
        Some(e) if facts.id == e || known_loaded_id == Some(facts.id.as_str()) => {
            ImageState::Matches(facts)
        }
        Some(e) => ImageState::Different {
            facts,
            expected: e.to_string(),
        },
    }
}

impl Client {
    /// Inspects an image; `Ok(None)` when it does not exist.
    pub async fn image(&self, reference: &str) -> Result<Option<ImageFacts>, EngineError> {
        match self.docker().inspect_image(reference).await {
            Ok(inspect) => {
                let config = inspect.config.unwrap_or_default();
                Ok(Some(ImageFacts {
                    id: inspect.id.unwrap_or_default(),
                    repo_tags: inspect.repo_tags.unwrap_or_default(),
                    repo_digests: inspect.repo_digests.unwrap_or_default(),
                    labels: config.labels.unwrap_or_default().into_iter().collect(),
                    user: config.user.unwrap_or_default(),
                    env: config.env.unwrap_or_default(),
                    size: inspect.size.unwrap_or_default(),
                }))
            }
            Err(source) => {
                let err = EngineError::InspectImage {
                    reference: reference.to_string(),
                    source,
                };
                if err.is_not_found() {
                    Ok(None)
                } else {
                    Err(err)
                }
            }
        }
    }

    /// Tags `image` (an id or reference) as `repo:tag`.
    pub async fn tag_image(&self, image: &str, repo: &str, tag: &str) -> Result<(), EngineError> {
        let options = TagImageOptions {
            repo: Some(repo.to_string()),
            tag: Some(tag.to_string()),
        };
        self.docker()
            .tag_image(image, Some(options))
            .await
            .map_err(|source| EngineError::Tag {
                image: image.to_string(),
                tag: format!("{repo}:{tag}"),
                source,
            })
    }

    /// Removes a tag or image. A missing image is not an error. Never forces, so an image a
    /// container still uses stays.
    pub async fn remove_image(&self, reference: &str) -> Result<(), EngineError> {
        let options = RemoveImageOptions {
            force: false,
            noprune: false,
            ..Default::default()
        };
        match self
            .docker()
            .remove_image(reference, Some(options), None)
            .await
        {
            Ok(_) => Ok(()),
            Err(source) => {
                let err = EngineError::RemoveImage {
                    reference: reference.to_string(),
                    source,
                };
                if err.is_not_found() { Ok(()) } else { Err(err) }
            }
        }
    }

    /// Imports a root filesystem tar as `repo:tag` (`docker import`), applying Dockerfile
    /// `changes` such as `CMD ["/bin/sh"]`; returns the new image id.
    pub async fn import_rootfs<S>(
        &self,
        rootfs: S,
        repo: &str,
        tag: &str,
        changes: &[String],
    ) -> Result<String, EngineError>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
    {
        let reference = format!("{repo}:{tag}");
        let options = CreateImageOptions {
            from_src: Some("-".to_string()),
            repo: Some(repo.to_string()),
            tag: Some(tag.to_string()),
            changes: changes.to_vec(),
            ..Default::default()
        };
        let mut stream =
            self.docker()
                .create_image(Some(options), Some(bollard::body_try_stream(rootfs)), None);
        // The engine's last message names the new image (`{"status":"sha256:…"}`).
        let mut announced = None;
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(id) = info.status.filter(|s| s.starts_with("sha256:")) {
                        announced = Some(id);
                    }
                }
                // Whole but for a line end when the image it announced is under the tag.
                Err(source) if crate::torn_line_end::is_torn_line_end(&source) => {
                    return match (announced, self.image(&reference).await?) {
                        (Some(id), Some(facts)) if facts.id == id => Ok(facts.id),
                        _ => Err(EngineError::Import { reference, source }),
                    };
                }
                Err(source) => return Err(EngineError::Import { reference, source }),
            }
        }
        let facts = self.image(&reference).await?;
        facts.map(|f| f.id).ok_or_else(|| EngineError::BadArchive {
            reference,
            detail: "the import finished but the image is not there".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judge_compares_ids_and_tolerates_the_known_loaded_id() {
        let facts = |id: &str| ImageFacts {
            id: id.into(),
            ..Default::default()
        };
        assert_eq!(judge(None, Some("sha256:a"), None), ImageState::Missing);
        assert_eq!(
            judge(Some(facts("sha256:a")), Some("sha256:a"), None),
            ImageState::Matches(facts("sha256:a"))
        );
        assert_eq!(
            judge(Some(facts("sha256:b")), None, None),
            ImageState::Matches(facts("sha256:b")),
            "no recorded digest: presence is enough"
        );
        assert_eq!(
            judge(Some(facts("sha256:m")), Some("sha256:a"), Some("sha256:m")),
            ImageState::Matches(facts("sha256:m")),
            "the id this engine gave the recorded digest"
        );
        assert_eq!(
            judge(Some(facts("sha256:b")), Some("sha256:a"), Some("sha256:m")),
            ImageState::Different {
                facts: facts("sha256:b"),
                expected: "sha256:a".into()
            }
        );
    }

    #[test]
    fn short_id_and_pinned_ref() {
        let facts = ImageFacts {
            id: "sha256:0123456789abcdef0123".into(),
            ..Default::default()
        };
        assert_eq!(facts.short_id(), "0123456789ab");
        assert_eq!(facts.pinned_ref(), "sha256:0123456789abcdef0123");
        let pushed = ImageFacts {
            repo_digests: vec!["r/x@sha256:aa".into()],
            ..facts
        };
        assert_eq!(pushed.pinned_ref(), "r/x@sha256:aa");
        let both = ImageFacts {
            repo_digests: vec!["r/x@sha256:aa".into(), "h:5/t/b@sha256:bb".into()],
            ..pushed
        };
        assert_eq!(
            both.digest_in_repository_of("h:5/t/b:v1"),
            Some("h:5/t/b@sha256:bb")
        );
        assert_eq!(both.digest_in_repository_of("r/x"), Some("r/x@sha256:aa"));
        assert_eq!(
            both.digest_in_repository_of("h:5/t/b@sha256:cc"),
            Some("h:5/t/b@sha256:bb"),
            "a reference by digest names its repository too"
        );
        assert_eq!(
            both.digest_in_repository_of("other:1"),
            None,
            "another repository's digest never pins this one"
        );
        assert_eq!(
            both.digest_in_repository_of("h:5/t/bb:v1"),
            None,
            "a repository whose name only starts the same is another one"
        );
        let hub = ImageFacts {
            repo_digests: vec!["busybox@sha256:dd".into()],
            ..ImageFacts::default()
        };
        assert_eq!(
            hub.digest_in_repository_of("docker.io/library/busybox:1.36"),
            Some("busybox@sha256:dd")
        );
    }
}
