//! Stage: `code/` copied and hashed, the `runtime.cargo` binary built, the templates
//! rendered and the build context laid out.

use super::*;

/// Stage's result: the build context, and what the later phases keep of the staging.
pub(super) struct Staged {
    pub(super) context: ContextBuilder,
    pub(super) rendered: crate::templates::RenderedFiles,
    pub(super) files: StagedFiles,
}

/// The staging directory and what was staged into it, for Export.
pub(super) struct StagedFiles {
    pub(super) tmp: tempfile::TempDir,
    pub(super) out_dir: PathBuf,
    pub(super) code: crate::stage::CodeStage,
    pub(super) lock_bytes: Option<Vec<u8>>,
    pub(super) cargo: Option<crate::cargo_bin::CargoOutput>,
}

/// Stage: copy `code/` into a staging directory beside the output, build the `runtime.cargo`
/// binary, render the templates and lay out the build context.
pub(super) async fn stage(r: &Resolved, run: &mut Run<'_, '_>) -> Result<Staged, PackageError> {
    let spec = &r.spec;
    let out_dir = r.out_root.join(&spec.name);
    // A killed run (SIGKILL, power loss) cannot clean up after itself; its owner pid in the
    // folder name tells us it is gone.
    for stale in crate::partials::sweep_stale(&r.out_root) {
        run.phases.event(Event::Note(format!(
            "removed {}, left by a run that was killed",
            stale.display()
        )));
    }
    let tmp = tempfile::Builder::new()
        .prefix(&crate::partials::partial_prefix(&spec.name))
        .tempdir_in(&r.out_root)
        .map_err(PackageError::io(
            "Creating a staging directory in",
            &r.out_root,
        ))?;
    let code_dir = tmp.path().join("code");
    let (spec_owned, metal_owned, code_owned) =
        (spec.clone(), r.metal_root.clone(), code_dir.clone());
    let code =
        tokio::task::spawn_blocking(move || stage_code(&spec_owned, &metal_owned, &code_owned))
            .await
            .map_err(|source| PackageError::Task {
                task: "staging",
                source,
            })??;
    for path in &code.ignored {
        run.phases
            .event(Event::Note(format!("code/: ignored {path}")));
    }
    run.phases.event(Event::Note(format!(
        "code/ {} files, {}",
        code.files.len(),
        code.digest
    )));
    let lock_bytes = match spec.runtime.lock() {
        Some(lock) => Some(fs::read(lock).map_err(|_| PackageError::MissingLock(lock.into()))?),
        None => None,
    };
    let cargo = match spec.runtime.cargo().cloned() {
        Some(cargo_spec) => Some(build_cargo_binary(cargo_spec, run).await?),
        None => None,
    };
    let metal_root = r.metal_root.clone();
    let metal_files = tokio::task::spawn_blocking(move || walk_metal(&metal_root))
        .await
        .map_err(|source| PackageError::Task {
            task: "tt-metal listing",
            source,
        })??;
    let rendered = render(
        spec,
        &RenderOptions {
            tool_version: run.options.tool_version.clone(),
            torch_pin: r.torch_pin.clone(),
            install_apt: run.options.base_image.is_none(),
            has_lock: lock_bytes.is_some(),
            openmpi: r.openmpi.clone(),
            build_cache: run.options.builder.uses_buildkit(run.client.host()),
        },
    )?;
    let mut ctx = ContextBuilder::new();
    // The engine stage copies these four folders whether or not they hold anything.
    for dir in ["plugin-src", "vllm-src", "wheels", "wheels/extra"] {
        ctx.with_dir(dir);
    }
    if let Some((files, _)) = &r.fetched.plugin {
        ctx.with_tree("plugin-src", files);
    }
    if let Some((files, _)) = &r.fetched.vllm {
        ctx.with_tree("vllm-src", files);
    }
    for (prefix, wheels) in [
        ("wheels", &r.fetched.vllm_wheels),
        ("wheels/extra", &r.fetched.extra_wheels),
    ] {
        for (name, path) in wheels {
            let size = fs::metadata(path)
                .map_err(PackageError::io("Reading", path))?
                .len();
            ctx.with_file(format!("{prefix}/{name}"), path.clone(), size, 0o644);
        }
    }
    for (path, text) in &rendered.files {
        ctx.with_bytes(path.clone(), text.clone(), 0o755);
    }
    ctx.with_tree("metalsrc", &metal_files);
    ctx.with_dir("metalsrc");
    for f in &code.files {
        ctx.with_file(
            format!("code/{}", f.path),
            code_dir.join(&f.path),
            f.size,
            f.mode,
        );
    }
    ctx.with_dir("code");
    ctx.with_bytes(
        "requirements.lock",
        lock_bytes.clone().unwrap_or_default(),
        0o644,
    );
    if let Some(out) = &cargo {
        ctx.with_file(
            format!("bin/{}", out.facts.bin),
            out.binary.clone(),
            out.facts.bytes,
            0o755,
        );
        // The provenance travels in the image too, so the server can report what it is
        // (`/info`) without the wire manifest; it holds no time stamp, so a no-op re-package
        // stays a layer-cache hit.
        let facts = serde_json::to_string_pretty(&out.facts).expect("plain data serializes");
        ctx.with_bytes("tt-model/cargo-build.json", facts, 0o644);
    }
    run.phases.event(Event::Context {
        files: ctx.file_count(),
        bytes: ctx.payload_bytes(),
    });
    Ok(Staged {
        context: ctx,
        rendered,
        files: StagedFiles {
            tmp,
            out_dir,
            code,
            lock_bytes,
            cargo,
        },
    })
}

/// `runtime.cargo`: the static binary built on the host, its compiler output in the log.
pub(super) async fn build_cargo_binary(
    cargo_spec: crate::spec::CargoBinary,
    run: &mut Run<'_, '_>,
) -> Result<crate::cargo_bin::CargoOutput, PackageError> {
    let (out, lines) = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        let out = crate::cargo_bin::build(&cargo_spec, &mut |l| lines.push(l.to_owned()));
        (out, lines)
    })
    .await
    .map_err(|source| PackageError::Task {
        task: "cargo build",
        source,
    })?;
    for line in &lines {
        run.log.line(line);
    }
    let out = out?;
    let f = &out.facts;
    run.phases.event(Event::Note(format!(
        "{} {} → {} ({}, static, {}{}, sha256 {})",
        f.bin,
        f.version,
        f.path,
        tt_model_manifest::numfmt::human_bytes(f.bytes),
        f.rustc,
        if f.workspace_dirty {
            ", dirty workspace"
        } else {
            ""
        },
        &f.sha256[..12]
    )));
    Ok(out)
}
