//! Build: the image labels, and the context streamed to the engine under a provisional tag.

use super::*;

/// Build's result: the image under its provisional tag, and the context it was built from.
pub(super) struct ImageBuilt {
    pub(super) id: String,
    pub(super) repository: String,
    pub(super) provisional: String,
    pub(super) final_tag: String,
    pub(super) context_sha256: String,
}

/// The labels every packaged image carries (what `list` and `rm` find it by).
pub(super) fn image_labels(r: &Resolved, code_digest: &str) -> BTreeMap<String, String> {
    let spec = &r.spec;
    let mut image_labels = BTreeMap::new();
    image_labels.insert(labels::NAME.to_string(), spec.name.clone());
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
    let mut build_args = BTreeMap::new();
    build_args.insert("BASE_IMAGE".to_string(), r.dev_pin.clone());
    build_args.insert("RUNTIME_IMAGE".to_string(), r.runtime_pin.clone());
    build_args.insert(
        "METAL_DESCRIBE".to_string(),
        r.facts.describe.clone().unwrap_or_else(|| "v0.0.0".into()),
    );
    build_args.insert("SCM_VERSION".to_string(), r.facts.scm_version.clone());
    build_args.insert("TT_MODEL_KIND".to_string(), spec.kind.as_str().to_string());
    if let Some(dir) = &spec.runtime.extra_models_dir {
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
        no_cache: run.options.no_cache,
    };
    let (stream, summary) = ctx.into_stream();
    let Run {
        client,
        phases,
        log,
        ..
    } = run;
    let built = client
        .build_image(&request, stream, |event| match &event {
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
        })
        .await;
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
    let short = id.trim_start_matches("sha256:");
    let final_tag = format!("{repository}:{}", &short[..short.len().min(12)]);
    Ok(ImageBuilt {
        id,
        repository,
        provisional,
        final_tag,
        context_sha256: context.sha256,
    })
}
