//! Export: the image tagged, its OCI layout written (or reused), the lock, card and wire
//! manifest written, and the staging directory swapped into place.

use super::*;

/// Export: tag the image, write (or reuse) its OCI layout, freeze the lock, write the card and
/// the wire manifest, and swap the staging directory into place.
pub(super) async fn export(
    r: Resolved,
    files: StagedFiles,
    image: ImageBuilt,
    verified: Verified,
    wire: &WireFn<'_>,
    run: &mut Run<'_, '_>,
) -> Result<Packaged, PackageError> {
    let spec = &r.spec;
    let short = image
        .final_tag
        .rsplit_once(':')
        .map_or("", |(_, tag)| tag)
        .to_string();
    run.client
        .tag_image(&image.id, &image.repository, &short)
        .await?;
    // The provisional tag stays on the engine's own build: the normalised image is its twin
    // (other id), and untagging the build would let the engine delete its intermediate images,
    // the classic builder's layer cache.
    let tmp = files.tmp;
    let out_dir = files.out_dir;
    let image_dir = tmp.path().join("image");
    let reused_export = match image.exported {
        // Build wrote the normalised layout into the staging directory already.
        Some(bytes) => {
            run.phases.event(Event::Exported {
                bytes,
                reused: false,
            });
            false
        }
        None if verified.reuse => {
            fs::rename(out_dir.join("image"), &image_dir)
                .map_err(PackageError::io("Reusing", out_dir.join("image")))?;
            run.phases.event(Event::Exported {
                bytes: 0,
                reused: true,
            });
            true
        }
        None => {
            let export = run
                .client
                .export_oci_layout(&image.id, &image_dir, &image.final_tag)
                .await?;
            if export.config_digest != image.id {
                run.phases.event(Event::Warning(format!(
                    "the exported config digest {} differs from the image id {}",
                    export.config_digest, image.id
                )));
            }
            run.phases.event(Event::Exported {
                bytes: export.bytes,
                reused: false,
            });
            false
        }
    };
    // The layout (new or reused) names its manifest: a registry push stores it as is.
    let manifest_digest = tt_model_oci::OciLayout::open(&image_dir)
        .map_err(|e| PackageError::Layout(e.into()))?
        .manifest_digest;
    let lock_text = match files.lock_bytes {
        Some(bytes) => bytes,
        None => freeze_lock(run.client, spec, &image.id).await?.into_bytes(),
    };
    write(&tmp.path().join("requirements.lock"), &lock_text)?;
    let packaged = Packaged {
        // Filled once, in the wire manifest's own type: what is returned is what is recorded,
        // and what the card shows.
        built: Built {
            image: image.final_tag,
            image_digest: Some(image.id),
            repo: Some(spec.repo.clone()),
            tt_model_version: run.options.tool_version.clone(),
            created_at: utc_now(),
            tt_metal: r.facts.clone(),
            code_sha256: Some(files.code.digest),
            vllm: r.fetched.vllm.as_ref().map(|(_, b)| b.clone()),
            plugin: r.fetched.plugin.as_ref().map(|(_, b)| b.clone()),
            cargo: files.cargo.map(|c| c.facts),
            base_images: r.base_images.clone(),
            context_sha256: Some(image.context_sha256),
            extra_code: r.fetched.extra_pins.clone(),
            extra: Default::default(),
        },
        manifest_digest,
        out_dir,
        verify_checks: verified.checks,
        reused_export,
        ignored: files.code.ignored,
    };
    let card = render_card(spec, &packaged.built)?;
    write(&tmp.path().join("README.md"), card.as_bytes())?;
    let wire_json = wire(&packaged)?;
    write(
        &tmp.path().join(tt_model_manifest::wire::MANIFEST_NAME),
        wire_json.as_bytes(),
    )?;
    swap_into_place(tmp, &packaged.out_dir)?;
    Ok(packaged)
}

pub(super) fn write(path: &Path, bytes: &[u8]) -> Result<(), PackageError> {
    fs::write(path, bytes).map_err(PackageError::io("Writing", path))
}

/// Replaces `out_dir` with the finished staging directory: the old output is moved aside
/// first and deleted only once the new one is in place.
pub(super) fn swap_into_place(tmp: tempfile::TempDir, out_dir: &Path) -> Result<(), PackageError> {
    let staged = tmp.keep();
    let aside = out_dir.with_file_name(format!(
        ".{}.old-{}",
        out_dir
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let had_old = out_dir.exists();
    if had_old {
        fs::rename(out_dir, &aside).map_err(PackageError::io("Moving aside", out_dir))?;
    }
    if let Err(e) = fs::rename(&staged, out_dir) {
        if had_old {
            let _ = fs::rename(&aside, out_dir);
        }
        let _ = fs::remove_dir_all(&staged);
        return Err(PackageError::Io {
            action: "Moving the package into",
            path: out_dir.to_path_buf(),
            source: e,
        });
    }
    if had_old {
        let _ = fs::remove_dir_all(&aside);
    }
    Ok(())
}
