//! Build: the image labels, the context streamed to the engine under a provisional tag, and
//! the engine's image made reproducible (`tt_model_engine::reproducible`): same inputs, same
//! image id, cold or warm.

use super::*;

use tt_model_engine::reproducible::Reproduce;
use tt_model_oci::reproducible::config::REBUILD_ARG;
use tt_model_oci::reproducible::recorded_build_id;

/// Build's result: the reproducible image, and the context it was built from.
pub(super) struct ImageBuilt {
    /// The normalised image's id (what ships, what verify runs).
    pub(super) id: String,
    pub(super) repository: String,
    pub(super) final_tag: String,
    pub(super) context_sha256: String,
    /// Bytes of the normalised OCI layout Build wrote into the staging directory's `image/`;
    /// `None` when the engine's build was the previous output's and its result was reused.
    pub(super) exported: Option<u64>,
}

/// The labels every packaged image carries (what `list` and `rm` find it by).
pub(super) fn image_labels(r: &Resolved, code_digest: &str) -> BTreeMap<String, String> {
    let spec = &r.spec;
    let mut image_labels = BTreeMap::new();
    image_labels.insert(labels::PACKAGE.to_string(), spec.name.clone());
    image_labels.insert(labels::REPO.to_string(), spec.repo.clone());
    image_labels.insert(labels::WEIGHTS.to_string(), spec.weights.clone());
    image_labels.insert(labels::ARCH.to_string(), spec.arch.clone());
    image_labels.insert(labels::KIND.to_string(), spec.kind.as_str().to_string());
    image_labels.insert(
        labels::ORIGINAL_KIND.to_string(),
        spec.kind.as_str().to_string(),
    );
    image_labels.insert(
        labels::PROFILES.to_string(),
        spec.profiles
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(","),
    );
    image_labels.insert(labels::CODE_SHA256.to_string(), code_digest.to_string());
    if let Some(sha) = &r.facts.sha {
        image_labels.insert(labels::TT_METAL_SHA.to_string(), sha.clone());
    }
    image_labels
}

/// Build: stream the context to the engine and build the image under a provisional tag.
pub(super) async fn build(
    r: &Resolved,
    files: &StagedFiles,
    ctx: ContextBuilder,
    run: &mut Run<'_, '_>,
) -> Result<ImageBuilt, PackageError> {
    let spec = &r.spec;
    let repository = format!("{IMAGE_REPOSITORY_PREFIX}/{}", spec.name);
    let provisional = format!("{repository}:build");
    let buildkit = run.options.builder.uses_buildkit(run.client.host());
    let mut build_args = BTreeMap::new();
    if buildkit {
        // BuildKit resolves `FROM sha256:<id>` against a registry: name the pins by tags
        // that hold exactly those images.
        build_args.insert(
            "BASE_IMAGE".to_string(),
            pin_tag(run.client, &r.dev_pin).await?,
        );
        build_args.insert(
            "RUNTIME_IMAGE".to_string(),
            pin_tag(run.client, &r.runtime_pin).await?,
        );
        // `--no-cache` reruns every RUN through a new TT_MODEL_REBUILD (the Dockerfile declares
        // it in every stage), not the engine's `nocache`, which would empty the build-cache
        // mount too; the image's normalisation empties the value again.
        let rebuild = if run.options.no_cache {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos().to_string())
                .unwrap_or_default()
        } else {
            String::new()
        };
        build_args.insert(REBUILD_ARG.to_string(), rebuild);
    } else {
        build_args.insert("BASE_IMAGE".to_string(), r.dev_pin.clone());
        build_args.insert("RUNTIME_IMAGE".to_string(), r.runtime_pin.clone());
    }
    build_args.insert(
        "METAL_DESCRIBE".to_string(),
        r.facts.describe.clone().unwrap_or_else(|| "v0.0.0".into()),
    );
    let scm_version =
        (r.facts.scm_version.clone()).unwrap_or_else(|| crate::git::FALLBACK_SCM_VERSION.into());
    build_args.insert("SCM_VERSION".to_string(), scm_version);
    build_args.insert("TT_MODEL_KIND".to_string(), spec.kind.as_str().to_string());
    let epoch = crate::git::source_date_epoch(&r.metal_root, r.facts.sha.as_deref());
    build_args.insert("SOURCE_DATE_EPOCH".to_string(), epoch.to_string());
    if let Some(dir) = spec.runtime.extra_models_dir() {
        build_args.insert(
            "EXTRA_MODELS_DIR".to_string(),
            format!("/opt/tt-metal/{dir}"),
        );
    }
    let request = BuildRequest {
        tag: provisional.clone(),
        dockerfile: DOCKERFILE.to_string(),
        build_args,
        labels: image_labels(r, &files.code.digest),
        network_mode: run.options.build_network.clone(),
        target: None,
        no_cache: run.options.no_cache && !buildkit,
    };
    let Run {
        client,
        phases,
        log,
        ..
    } = run;
    // dockerd's classic builder now and then loses a layer it has just made while committing a
    // step ("failed to get layer …: layer does not exist", moby/moby#36573, #37965, #41595;
    // seen here after consecutive `COPY --from` steps). Every step before it is in the layer
    // cache, so building again is cheap and succeeds: one retry, announced as a warning.
    let mut retried = false;
    let (built, summary) = loop {
        let (stream, summary) = ctx.clone().into_stream();
        let on_event = |event: BuildEvent| match &event {
            BuildEvent::Step {
                index,
                total,
                instruction,
            } => {
                log.line(&format!("Step {index}/{total} : {instruction}"));
                phases.event(Event::BuildStep {
                    index: *index,
                    total: *total,
                    instruction: instruction.clone(),
                });
            }
            BuildEvent::Cached => {
                log.line(" ---> Using cache");
                phases.event(Event::BuildCached);
            }
            BuildEvent::Line(l) => {
                log.line(l);
                phases.event(Event::BuildLine(l.clone()));
            }
        };
        let built = if buildkit {
            match client
                .build_image_buildkit(&request, stream, on_event)
                .await
            {
                Ok(id) => Ok(id),
                Err(tt_model_engine::buildkit::BuildKitError::Engine(e)) => Err(e),
                Err(e) => {
                    let _ = summary.await;
                    return Err(e.into());
                }
            }
        } else {
            client.build_image(&request, stream, on_event).await
        };
        match &built {
            Err(tt_model_engine::EngineError::Build { message, .. })
                if !retried && is_lost_layer(message) =>
            {
                log.line(&format!("error: {message}"));
                phases.event(Event::Warning(format!(
                    "the engine lost a layer while committing a step ({message}; a known dockerd race, moby/moby#36573): building again from its cache"
                )));
                // The aborted context stream's summary is of no use; let its task end.
                let _ = summary.await;
                retried = true;
            }
            _ => break (built, summary),
        }
    };
    let id = match built {
        Ok(id) => id,
        Err(e) => {
            if let tt_model_engine::EngineError::Build { message, .. } = &e {
                log.line(&format!("error: {message}"));
            }
            return Err(e.into());
        }
    };
    let context = summary
        .await
        .map_err(|source| PackageError::Task {
            task: "build context",
            source,
        })?
        .map_err(PackageError::io(
            "Streaming the build context from",
            &r.metal_root,
        ))?;
    log.line(&format!("image {id} (context {})", context.sha256));
    let (raw, previous) = (id, previous_output(&files.out_dir));
    // A build served whole from the layer cache is the engine image the previous output was
    // made from: its normalised twin is the previous output's image, still in the engine.
    let reusable = match &previous {
        Some(prev) if recorded_build_id(&files.out_dir.join("image")).as_ref() == Some(&raw) => {
            client.image(prev).await?.is_some()
        }
        _ => false,
    };
    let (id, exported) = match previous.clone() {
        Some(prev) if reusable => {
            log.line(&format!("{raw} is the previous build: its image is {prev}"));
            (prev, None)
        }
        _ => {
            let started = Instant::now();
            let done = client
                .reproducible_image(&Reproduce {
                    built: raw.clone(),
                    base: r.runtime_pin.clone(),
                    epoch,
                    dest: files.tmp.path().join("image"),
                    repository: repository.clone(),
                })
                .await
                .map_err(PackageError::Layout)?;
            let line = format!(
                "reproducible: {} layers normalised to SOURCE_DATE_EPOCH={epoch} ({} times clamped) in {:.1} s: {raw} → {}",
                done.layers_rewritten,
                done.clamped,
                started.elapsed().as_secs_f64(),
                done.id
            );
            log.line(&line);
            phases.event(Event::Note(line));
            if previous.as_ref() == Some(&done.id) {
                // A fresh build (another engine build id) of the same inputs gave the same
                // image: the package's digest is proven, not merely cached.
                phases.event(Event::Note(format!(
                    "reproduced: {} is the previous package's image, bit for bit",
                    done.id
                )));
            }
            (done.id, Some(done.bytes))
        }
    };
    let short = id.trim_start_matches("sha256:");
    let final_tag = format!("{repository}:{}", &short[..short.len().min(12)]);
    Ok(ImageBuilt {
        id,
        repository,
        final_tag,
        context_sha256: context.sha256,
        exported,
    })
}

/// A tag naming the pinned image `pin` (`sha256:<id>`) for BuildKit, which cannot build `FROM`
/// an image id: `tt-model/base:<12 hex>`, set now so it holds exactly that image. A pin that
/// is already a reference is returned as it is.
async fn pin_tag(client: &Client, pin: &str) -> Result<String, PackageError> {
    let Some(hex) = pin.strip_prefix("sha256:") else {
        return Ok(pin.to_string());
    };
    let tag = &hex[..hex.len().min(12)];
    client.tag_image(pin, PIN_REPOSITORY, tag).await?;
    Ok(format!("{PIN_REPOSITORY}:{tag}"))
}

/// The repository of the tags [`pin_tag`] sets.
const PIN_REPOSITORY: &str = "tt-model/base";

/// Whether a build error is dockerd's lost-layer race (see [`build`]), worth one more try.
fn is_lost_layer(message: &str) -> bool {
    message.contains("failed to get layer") && message.contains("layer does not exist")
}

#[cfg(test)]
mod lost_layer_tests {
    use super::is_lost_layer;

    #[test]
    fn only_the_engines_lost_layer_race_is_retried() {
        // Verbatim from a CI run on dockerd 20.10.24.
        assert!(is_lost_layer(
            "failed to export image: failed to create image: failed to get layer sha256:5f26e0aa48225561dfb64ff5d382c5c5964a18ab5c61934fe5dc19051768cba4: layer does not exist"
        ));
        assert!(!is_lost_layer(
            "The command '/bin/sh -c sh /ctx/install_engine.sh' returned a non-zero code: 1"
        ));
        assert!(!is_lost_layer("layer does not exist"));
    }
}
