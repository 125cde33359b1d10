//! The base images: found in the engine, or pulled as the pull policy allows, then pinned by
//! digest; and what the builder base brings that the runtime image must carry too (OpenMPI
//! ULFM, which tt-metal's libraries link against).

use std::time::Instant;

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
/// as events), and returns its pinned reference: the registry digest it was pulled by, else
/// the local image id.
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
    let facts = if pull {
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
    Ok(facts.pinned_ref_for(reference))
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
    use super::recorded;

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
