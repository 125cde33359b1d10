//! Resolve: fetch and pin every source, read the tt-metal tree's facts, pin the base images
//! (pulled when missing, [`super::base`]).

use super::base::{OPENMPI_DIR, base_has_openmpi, pin_base, recorded};
use super::*;

/// Resolve's result: sources fetched and pinned, the tt-metal facts, the base images pinned.
pub(super) struct Resolved {
    /// The spec with git `extra_code` roots pointing at their fetched checkouts.
    pub(super) spec: PackageSpec,
    pub(super) fetched: crate::sources::Fetched,
    pub(super) metal_root: PathBuf,
    pub(super) facts: tt_model_manifest::wire::TtMetalBuild,
    pub(super) torch_pin: Option<String>,
    pub(super) out_root: PathBuf,
    pub(super) dev_pin: String,
    pub(super) runtime_pin: String,
    pub(super) base_images: BTreeMap<String, String>,
    /// OpenMPI ULFM's directory when the builder base carries it: the runtime image gets a
    /// copy, on `LD_LIBRARY_PATH`.
    pub(super) openmpi: Option<String>,
}

/// Resolve: fetch and pin every source, read the tt-metal tree's facts, pin both base images.
pub(super) async fn resolve(
    spec: &PackageSpec,
    run: &mut Run<'_, '_>,
) -> Result<Resolved, PackageError> {
    let out_root = check_out_root(&run.options.out_root)?;
    fs::create_dir_all(&out_root).map_err(PackageError::io("Creating", &out_root))?;
    // Git sources, local plugin/vLLM trees and wheels: fetched or listed on the host, every
    // git ref pinned to its commit (crate::sources).
    let (spec_owned, out_owned) = (spec.clone(), out_root.clone());
    let scratch = format!("{}sources-", crate::partials::partial_prefix(&spec.name));
    let fetched = tokio::task::spawn_blocking(move || {
        crate::sources::fetch_sources(&spec_owned, &out_owned, &scratch)
    })
    .await
    .map_err(|source| PackageError::Task {
        task: "fetching sources",
        source,
    })??;
    let mut spec = spec.clone();
    spec.extra_code = fetched.extra_code.clone();
    let metal_root = match (&spec.metal, &fetched.metal) {
        (MetalSource::Local { path }, _) => path.clone(),
        (MetalSource::Git { .. }, Some((_, checkout))) => checkout.clone(),
        (MetalSource::Git { .. }, None) => unreachable!("fetch_sources fetches a git tt-metal"),
    };
    check_metal_tree(&metal_root)?;
    let mut facts = metal_facts(&metal_root);
    if let Some((pin, _)) = &fetched.metal {
        facts.sha = Some(pin.sha.clone());
        facts.mode = Some("git".into());
        facts.remote = Some(pin.repo.clone());
        facts.branch =
            (!pin.git_ref.chars().all(|c| c.is_ascii_hexdigit())).then(|| pin.git_ref.clone());
        facts.dirty = false;
        facts.pushed = Some(true);
    }
    for (pin, what) in fetched
        .metal
        .iter()
        .map(|(p, _)| (p, "tt-metal"))
        .chain(fetched.extra_pins.iter().map(|p| (p, "extra_code")))
    {
        run.phases.event(Event::Note(format!(
            "{what} {} @ {} → {}",
            pin.repo,
            pin.git_ref,
            &pin.sha[..12]
        )));
    }
    let torch_pin = read_torch_pin(&metal_root);
    let (dev_ref, runtime_ref) = match &run.options.base_image {
        Some(b) => (b.clone(), b.clone()),
        None => (
            default_dev_image(&spec.ubuntu),
            format!("ubuntu:{}", spec.ubuntu),
        ),
    };
    let dev_pin = pin_base(&dev_ref, run).await?;
    let runtime_pin = if runtime_ref == dev_ref {
        dev_pin.clone()
    } else {
        pin_base(&runtime_ref, run).await?
    };
    let mut base_images = BTreeMap::new();
    base_images.insert("builder".to_string(), recorded(&dev_ref, &dev_pin));
    base_images.insert("runtime".to_string(), recorded(&runtime_ref, &runtime_pin));
    run.phases.event(Event::Note(format!(
        "base image {dev_ref} pinned to {dev_pin}"
    )));
    let openmpi = if base_has_openmpi(&dev_pin, run).await? {
        run.phases.event(Event::Note(format!(
            "OpenMPI ULFM: {OPENMPI_DIR} from {dev_ref} goes into the runtime image, on LD_LIBRARY_PATH"
        )));
        Some(OPENMPI_DIR.to_string())
    } else {
        run.phases.event(Event::skipped(
            format!("OpenMPI ULFM: {dev_ref} has no {OPENMPI_DIR}; the runtime image carries none"),
            None,
        ));
        None
    };
    match &facts.sha {
        Some(sha) => run.phases.event(Event::Note(format!(
            "tt-metal {} ({}{})",
            facts.describe.as_deref().unwrap_or(sha),
            &sha[..sha.len().min(12)],
            if facts.dirty { ", dirty" } else { "" }
        ))),
        None => run.phases.event(Event::Warning(format!(
            "{} is not a git checkout: no commit is recorded for tt-metal",
            metal_root.display()
        ))),
    }
    Ok(Resolved {
        spec,
        fetched,
        metal_root,
        facts,
        torch_pin,
        out_root,
        dev_pin,
        runtime_pin,
        base_images,
        openmpi,
    })
}
