//! Verify: the manifest's checks inside the image, and the isolated one-shot containers
//! (verify, and the `pip freeze` that writes `requirements.lock`).

use super::*;

/// Verify's result: how many checks passed, and whether this exact image passed before (the
/// previous output's verified layout is then reused).
pub(super) struct Verified {
    pub(super) checks: usize,
    pub(super) reuse: bool,
}

/// Verify: run the manifest's checks inside the image (isolated, as the runtime user), unless
/// the previous output holds this very image.
pub(super) async fn verify(
    r: &Resolved,
    rendered: &crate::templates::RenderedFiles,
    image: &ImageBuilt,
    out_dir: &Path,
    run: &mut Run<'_, '_>,
) -> Result<Verified, PackageError> {
    let checks = rendered.checks.len();
    if previous_output(out_dir).is_some_and(|prev| prev == image.id) {
        run.phases.event(Event::Verified {
            checks,
            reused: true,
        });
        return Ok(Verified {
            checks,
            reuse: true,
        });
    }
    let outcome = run
        .client
        .run_to_completion(&verify_run(&image.id, &r.spec.name))
        .await?;
    for line in outcome.output.lines() {
        run.log.line(line);
    }
    // On failure the image keeps only its provisional tag; the next package reuses its cached
    // layers.
    let checks = crate::verify::interpret(&rendered.checks, outcome.exit_code, &outcome.output)?;
    run.phases.event(Event::Verified {
        checks,
        reused: false,
    });
    Ok(Verified {
        checks,
        reuse: false,
    })
}

/// The Python that prints `name==version<TAB>local|index` for every distribution.
pub(super) const FREEZE_SCRIPT: &str = r#"
import importlib.metadata as md, json
for d in md.distributions():
    name = d.metadata["Name"]
    direct = d.read_text("direct_url.json")
    local = False
    if direct:
        try:
            local = json.loads(direct).get("url", "").startswith("file:")
        except Exception:
            local = True
    print(f"{name}=={d.version}\t{'local' if local else 'index'}")
"#;

/// The runtime user of every packaged image (`tt`); the one-shot checks run as it too.
pub const RUNTIME_USER: &str = "1000:1000";

/// The one-shot verify container: `verify.sh` as the runtime user, no network, no devices,
/// no mounts. Isolation is stated here, not inherited from the Dockerfile's `USER` line,
/// which a base image or a template change could lose.
pub fn verify_run(image: &str, name: &str) -> OneShot {
    OneShot {
        image: image.to_string(),
        entrypoint: Some(vec![]),
        cmd: vec!["sh".into(), "/usr/local/share/tt-model/verify.sh".into()],
        user: Some(RUNTIME_USER.into()),
        env: vec![],
        network_mode: Some("none".into()),
        label: Some((labels::PACKAGE.to_string(), format!("{name}-verify"))),
    }
}

/// The one-shot freeze container (the venv's distributions), isolated as [`verify_run`].
pub fn freeze_run(image: &str) -> OneShot {
    OneShot {
        image: image.to_string(),
        entrypoint: Some(vec!["/opt/tt-venv/bin/python".into()]),
        cmd: vec!["-c".into(), FREEZE_SCRIPT.into()],
        user: Some(RUNTIME_USER.into()),
        network_mode: Some("none".into()),
        ..Default::default()
    }
}

/// Freezes the image's venv into a lock (index-origin distributions, minus the kind's
/// excludes), or notes that the image has no Python environment.
pub(super) async fn freeze_lock(
    client: &Client,
    spec: &PackageSpec,
    image: &str,
) -> Result<String, PackageError> {
    if !spec.needs_python() {
        return Ok(format!(
            "# {}: this http-server image has no Python environment; nothing to pin.\n",
            spec.name
        ));
    }
    let run = client.run_to_completion(&freeze_run(image)).await?;
    if run.exit_code != 0 {
        return Err(PackageError::Freeze {
            status: run.exit_code,
            output: run.output.trim().to_string(),
        });
    }
    Ok(crate::lock::lock_from_freeze(
        &run.output,
        crate::launcher::lock_excludes(spec.kind),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the engine is asked for, not what the image's Dockerfile happens to say: the
    /// verify and freeze containers run as 1000:1000, without network, devices or mounts.
    #[test]
    fn verify_and_freeze_containers_are_isolated_by_their_spec() {
        for (what, run) in [
            ("verify", verify_run("sha256:abc", "demo")),
            ("freeze", freeze_run("sha256:abc")),
        ] {
            let body = run.create_body();
            assert_eq!(body.image.as_deref(), Some("sha256:abc"), "{what}");
            assert_eq!(body.user.as_deref(), Some("1000:1000"), "{what}");
            assert_eq!(body.network_disabled, Some(true), "{what}");
            let host = body.host_config.expect("host config");
            assert_eq!(host.network_mode.as_deref(), Some("none"), "{what}");
            assert!(host.devices.unwrap_or_default().is_empty(), "{what}");
            assert!(
                host.device_requests.unwrap_or_default().is_empty(),
                "{what}"
            );
            assert!(host.binds.unwrap_or_default().is_empty(), "{what}");
            assert!(host.mounts.unwrap_or_default().is_empty(), "{what}");
            assert_ne!(host.privileged, Some(true), "{what}");
            assert!(host.cap_add.unwrap_or_default().is_empty(), "{what}");
        }
    }
}
