//! The base images: found in the engine, or pulled as the pull policy allows, then pinned by
//! digest; and what the builder base brings that the runtime image must carry too (OpenMPI
//! ULFM, which tt-metal's libraries link against).

use std::time::Instant;

use tt_model_engine::images::ImageFacts;
use tt_model_engine::oneshot::OneShot;
use tt_model_engine::pull::PullProgress;

use super::*;

/// When `package` pulls a base image (`--pull`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PullPolicy {
    /// Never pull: a base the engine lacks is an error.
    Never,
    /// Pull a base only when the engine lacks it, as the original's `docker build` does with
    /// its `FROM` images.
    #[default]
    Missing,
    /// Pull every base before building, so a tag that moved on its registry is picked up.
    Always,
}

impl PullPolicy {
    /// The flag's spelling (`never`, `missing`, `always`).
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Never => "never",
            PullPolicy::Missing => "missing",
            PullPolicy::Always => "always",
        }
    }
}

/// Where the tt-metalium dev image keeps OpenMPI ULFM (tt-metal's `install_dependencies.sh`
/// installs it there), and where the runtime image gets it.
pub const OPENMPI_DIR: &str = "/opt/openmpi-v5.0.7-ulfm";

/// Makes sure `reference` is in the engine, pulling it as the policy says (with byte progress
/// as events), and returns its pinned reference ([`pin_of`]).
pub(super) async fn pin_base(
    reference: &str,
    run: &mut Run<'_, '_>,
) -> Result<String, PackageError> {
    let present = run.client.image(reference).await?;
    let policy = run.options.pull;
    let pull = match (policy, &present) {
        (PullPolicy::Never, None) => {
            return Err(PackageError::BaseImageMissing(reference.to_string()));
        }
        (PullPolicy::Always, _) | (PullPolicy::Missing, None) => true,
        (PullPolicy::Never | PullPolicy::Missing, Some(_)) => false,
    };
    let facts: ImageFacts = if pull {
        let started = Instant::now();
        let client = run.client;
        let credentials = &run.options.credentials;
        let phases = &mut run.phases;
        let mut report = |p: PullProgress| {
            phases.event(Event::Pulling {
                image: reference.to_string(),
                done: p.done,
                total: p.total,
            })
        };
        let stats = client
            .pull_image(reference, credentials, &mut report)
            .await
            .map_err(|e| match e {
                tt_model_engine::EngineError::Pull { answer, .. } => PackageError::BaseImagePull {
                    reference: reference.to_string(),
                    answer,
                },
                other => PackageError::Engine(other),
            })?;
        run.log.line(&format!(
            "pulled {reference}: {} bytes in {} layers ({} already present), {:.1}s",
            stats.bytes,
            stats.layers,
            stats.present,
            started.elapsed().as_secs_f64()
        ));
        run.phases.event(Event::Pulled {
            image: reference.to_string(),
            bytes: stats.bytes,
            layers: stats.layers,
            took: started.elapsed(),
        });
        run.client
            .image(reference)
            .await?
            .ok_or_else(|| PackageError::BaseImagePull {
                reference: reference.to_string(),
                answer: "the pull finished but the engine does not list the image".into(),
            })?
    } else {
        present.expect("checked above")
    };
    pin_of(&facts, reference, pull).map_err(|answer| PackageError::BaseImagePull {
        reference: reference.to_string(),
        answer,
    })
}

/// The pin recorded for the base `reference`. A pulled image is pinned by the digest the
/// engine lists for the repository it was pulled from: never the local id (which no
/// registry serves) and never another repository's digest (the same image pushed elsewhere
/// says nothing of what this reference resolves to). An image the engine already had is
/// pinned by that repository's digest when it has one, else by its local id. The error
/// (a pulled image without its repository's digest) is the answer to report.
pub(super) fn pin_of(facts: &ImageFacts, reference: &str, pulled: bool) -> Result<String, String> {
    match facts.digest_in_repository_of(reference) {
        Some(digest) => Ok(digest.to_string()),
        None if pulled => Err(format!(
            "the pull finished but the engine lists no registry digest of that repository for it (it lists {})",
            if facts.repo_digests.is_empty() {
                "none".to_string()
            } else {
                facts.repo_digests.join(", ")
            }
        )),
        None => Ok(facts.id.clone()),
    }
}

/// The provenance record of a base: the reference as named, `@` the digest it was pinned to
/// (the registry's manifest digest for a pulled image, else the local id), so
/// `host/repo:tag@sha256:…` names both what was asked for and what was used.
pub(super) fn recorded(reference: &str, pin: &str) -> String {
    let digest = pin.rsplit_once('@').map_or(pin, |(_, d)| d);
    format!("{reference}@{digest}")
}

/// Whether the builder base `image` carries OpenMPI ULFM ([`OPENMPI_DIR`]/lib), asked in a
/// one-shot container (no network). The tt-metalium dev image does; the test bases do not.
pub(super) async fn base_has_openmpi(
    image: &str,
    run: &mut Run<'_, '_>,
) -> Result<bool, PackageError> {
    let probe = OneShot {
        image: image.to_string(),
        entrypoint: Some(vec![]),
        cmd: vec![
            "sh".into(),
            "-c".into(),
            format!("if [ -d {OPENMPI_DIR}/lib ]; then echo present; else echo absent; fi"),
        ],
        network_mode: Some("none".into()),
        label: Some((labels::PACKAGE.to_string(), "base-probe".into())),
        ..Default::default()
    };
    let out = run.client.run_to_completion(&probe).await?;
    match (out.exit_code, out.output.trim()) {
        (0, "present") => Ok(true),
        (0, "absent") => Ok(false),
        // A base without a shell cannot run the build's RUN steps either; the build names
        // that. Here it only means we cannot tell, so nothing is copied.
        (status, said) => {
            run.phases.event(Event::Warning(format!(
                "cannot tell whether {image} carries {OPENMPI_DIR} (probe exit {status}: {said}); not copying it"
            )));
            Ok(false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{pin_of, recorded};
    use tt_model_engine::images::ImageFacts;

    /// An image as the engine lists one after a pull: the pulled repository's digest second,
    /// so that the first digest of any repository is the wrong answer.
    fn pulled_image() -> ImageFacts {
        ImageFacts {
            id: "sha256:1d1d".into(),
            repo_tags: vec!["127.0.0.1:5000/tt/base:v1".into(), "mirror/base:v1".into()],
            repo_digests: vec![
                "mirror/base@sha256:aaaa".into(),
                "127.0.0.1:5000/tt/base@sha256:bbbb".into(),
            ],
            ..ImageFacts::default()
        }
    }

    #[test]
    fn a_pulled_base_is_pinned_by_its_own_repositorys_digest() {
        let facts = pulled_image();
        assert_eq!(
            pin_of(&facts, "127.0.0.1:5000/tt/base:v1", true).unwrap(),
            "127.0.0.1:5000/tt/base@sha256:bbbb",
            "not the first digest listed, not the local id"
        );
        assert_eq!(
            pin_of(&facts, "mirror/base:v1", true).unwrap(),
            "mirror/base@sha256:aaaa"
        );
    }

    #[test]
    fn a_pulled_base_without_its_repositorys_digest_is_refused_not_pinned_by_another() {
        let mut facts = pulled_image();
        facts.repo_digests.retain(|d| d.starts_with("mirror/"));
        let answer = pin_of(&facts, "127.0.0.1:5000/tt/base:v1", true).unwrap_err();
        assert!(answer.contains("mirror/base@sha256:aaaa"), "{answer}");
        facts.repo_digests.clear();
        assert!(pin_of(&facts, "127.0.0.1:5000/tt/base:v1", true).is_err());
    }

    #[test]
    fn a_local_base_is_pinned_by_its_id_unless_its_repository_has_a_digest() {
        let mut facts = pulled_image();
        assert_eq!(
            pin_of(&facts, "local/busybox:tt-model", false).unwrap(),
            "sha256:1d1d",
            "another repository's digest does not pin a local tag"
        );
        facts.repo_digests.push("local/busybox@sha256:cccc".into());
        assert_eq!(
            pin_of(&facts, "local/busybox:tt-model", false).unwrap(),
            "local/busybox@sha256:cccc"
        );
    }

    #[test]
    fn the_record_names_the_reference_and_one_digest() {
        assert_eq!(
            recorded("h:5/t/b:v1", "h:5/t/b@sha256:aa"),
            "h:5/t/b:v1@sha256:aa",
            "a registry digest: the repository is not repeated"
        );
        assert_eq!(
            recorded("local/busybox:tt-model", "sha256:id"),
            "local/busybox:tt-model@sha256:id"
        );
    }
}
