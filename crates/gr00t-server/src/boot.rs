//! Boot: resolve the model and tokenizer directories, load the runtime, warm up, self-check.
//!
//! The policy is built in exactly one place, [`load_policy`]: the real CPU model
//! (`gr00t_runtime::model::CpuPolicy`). There is no fake policy in this binary.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use gr00t_runtime::n17::config::GrootVersion;
use gr00t_runtime::n17::model::{N17ModelError, VERSION_N17, check_version};
use gr00t_runtime::policy::Policy;
use gr00t_runtime::processor::Processor;
use gr00t_runtime::request::HostPipeline;
use gr00t_runtime::tokenizer::QwenTokenizer;

use crate::demo::weights_fingerprint;
use crate::model_dir;
use crate::runtime::{Runtime, RuntimeInfo, pcc, stage_for};
use crate::settings::Settings;

pub use crate::demo::Demo;

/// Build the policy for the requested backend (`GR00T_DIT_BACKEND`):
/// - `cpu`: the f32 CPU reference model;
/// - `megakernel`: the CPU model around the DiT megakernel, whose blocks run from the
///   block-float arena (`GR00T_MK_ARENA_DTYPE`, cached under `GR00T_TT_CACHE`) on the Blackhole
///   emulator, or (`GR00T_MK_DEVICE=p150a|sim`, cargo feature `device`) on a device through a
///   ttnn worker whose every exchange has the deadline `GR00T_MK_DEVICE_TIMEOUT_S`; without
///   the feature those fail here, clearly;
/// - `ttnn`: the tt-metal trace path, which this build does not include: refused, never
///   silently replaced by another backend.
pub fn load_policy(settings: &Settings, model_dir: &Path) -> anyhow::Result<Box<dyn Policy>> {
    let load_err = |e: &dyn std::fmt::Display| {
        anyhow::anyhow!("cannot load the model from `{}`: {e}", model_dir.display())
    };
    match settings.dit_backend.as_str() {
        "cpu" => Ok(Box::new(
            gr00t_runtime::model::CpuPolicy::load(model_dir).map_err(|e| load_err(&e))?,
        )),
        "megakernel" => {
            let mut config = settings
                .megakernel()
                .map_err(|e| anyhow::anyhow!("GR00T_MK_ARENA_DTYPE: {e}"))?;
            // The whole action head goes on the device with the served embodiment's weights
            // (the runtime declines it on the emulator).
            if settings.mk_head_on_device && settings.mk_device != "emulator" {
                let processor = Processor::load(model_dir, &settings.embodiment)?;
                config.head_embodiment = Some(processor.embodiment_id);
            }
            let p = gr00t_megakernel::MegakernelPolicy::load(model_dir, &config, device_opener())
                .map_err(|e| load_err(&e))?;
            tracing::info!("DiT arena: {:?}", p.arena_outcome);
            Ok(Box::new(p))
        }
        other => anyhow::bail!(
            "GR00T_DIT_BACKEND={other} needs the tt-metal device runtime, which this build does not include (use cpu or megakernel)"
        ),
    }
}

/// The device backend this build carries (cargo feature `device`): `gr00t-device`'s ttnn
/// worker; without the feature none, and `GR00T_MK_DEVICE=p150a|sim` is refused as not built in.
fn device_opener() -> Option<&'static dyn gr00t_megakernel::DeviceOpener> {
    #[cfg(feature = "device")]
    return Some(&gr00t_device::TtnnOpener);
    #[cfg(not(feature = "device"))]
    None
}

/// `--model-dir`, else the HF cache snapshot at `TT_WEIGHTS_REVISION`.
pub fn resolve_model_dir(settings: &Settings, flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    let dir = match flag {
        Some(d) => d.to_path_buf(),
        None => model_dir::hf_snapshot(
            &settings.hf_hub_cache,
            &settings.weights_repo,
            settings.weights_revision.as_deref(),
        )?,
    };
    model_dir::check(&dir)?;
    Ok(dir)
}

/// `--tokenizer-dir`, else `GR00T_TOKENIZER_DIR`, else the HF cache snapshot
/// `GR00T_TOKENIZER_REPO` at `GR00T_TOKENIZER_REVISION` (a package's pinned auxiliary weights,
/// read offline like the checkpoint), else `<model-dir>/tokenizer`.
pub fn resolve_tokenizer_dir(
    settings: &Settings,
    flag: Option<&Path>,
    model_dir: &Path,
) -> anyhow::Result<PathBuf> {
    let (dir, from) = if let Some(d) = flag {
        (d.to_path_buf(), "--tokenizer-dir".to_owned())
    } else if let Some(d) = &settings.tokenizer_dir {
        (d.clone(), "GR00T_TOKENIZER_DIR".to_owned())
    } else if let Some((repo, rev)) = &settings.tokenizer_snapshot {
        let d = model_dir::hf_snapshot(&settings.hf_hub_cache, repo, Some(rev))?;
        let from = format!(
            "GR00T_TOKENIZER_REPO={repo} at GR00T_TOKENIZER_REVISION={rev} in the HF cache `{}`",
            settings.hf_hub_cache.display()
        );
        (d, from)
    } else {
        (model_dir.join("tokenizer"), "the default".to_owned())
    };
    if !dir.is_dir() {
        bail!(
            "tokenizer directory `{}` ({from}) does not exist (set --tokenizer-dir, GR00T_TOKENIZER_DIR or GR00T_TOKENIZER_REPO + GR00T_TOKENIZER_REVISION)",
            dir.display()
        );
    }
    Ok(dir)
}

/// The embodiment tags an N1.7 checkpoint's `processor_config.json` has modality configs for.
pub fn checkpoint_embodiments(model_dir: &Path) -> anyhow::Result<Vec<String>> {
    let path = model_dir.join("processor_config.json");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("`{}`:{}:{}: {e}", path.display(), e.line(), e.column()))?;
    let configs = v
        .pointer("/processor_kwargs/modality_configs")
        .and_then(|m| m.as_object())
        .with_context(|| {
            format!(
                "`{}` has no object `processor_kwargs.modality_configs`",
                path.display()
            )
        })?;
    Ok(configs.keys().cloned().collect())
}

/// The settings N1.7 runs with. `GR00T_EMBODIMENT` unset means N1.6's `gr1`, which no N1.7
/// checkpoint has: the checkpoint's only embodiment is taken instead, and a checkpoint with
/// several is refused naming them (guessing a robot is worse than asking). The layout is then
/// `dynamic` unless `GR00T_LAYOUT` says otherwise. N1.6 never comes here.
pub fn n17_settings(settings: &Settings, model_dir: &Path) -> anyhow::Result<Settings> {
    let mut s = settings.clone();
    if settings.embodiment_requested.is_some() {
        return Ok(s);
    }
    let tags = checkpoint_embodiments(model_dir)?;
    match tags.as_slice() {
        [one] => s.embodiment = one.clone(),
        _ => bail!(
            "GR00T_EMBODIMENT is not set and the N1.7 checkpoint `{}` has {} embodiments: set it to one of {}",
            model_dir.display(),
            tags.len(),
            tags.join(", ")
        ),
    }
    match settings.layout_requested.as_deref() {
        None => s.layout = "dynamic".into(),
        Some("gr1") => bail!(
            "GR00T_LAYOUT=gr1 is the GR1 layout but the N1.7 checkpoint's embodiment is {} (GR00T_EMBODIMENT unset)",
            s.embodiment
        ),
        Some(_) => {}
    }
    Ok(s)
}

/// Where the demo is: `--demo-dir`, else `GR00T_DEMO_DIR`, else `<model-dir>/demo` when the
/// checkpoint carries one (a demo belongs to the weights it was made with, so it may travel
/// with them, as `gr00t-server make-checkpoint` writes it), else none.
pub fn resolve_demo_dir(
    settings: &Settings,
    flag: Option<&Path>,
    model_dir: &Path,
) -> Option<PathBuf> {
    flag.map(Path::to_path_buf)
        .or_else(|| settings.demo_dir.clone())
        .or_else(|| {
            let d = model_dir.join("demo");
            d.join("request.json").is_file().then_some(d)
        })
}

/// Assemble the runtime around an already built policy.
pub fn build_runtime(
    settings: &Settings,
    model_dir: &Path,
    tokenizer_dir: &Path,
    policy: Box<dyn Policy>,
) -> anyhow::Result<Runtime> {
    let processor = Processor::load(model_dir, &settings.embodiment)?;
    if settings.layout == "gr1" && processor.cameras.len() != 1 {
        bail!(
            "GR00T_LAYOUT=gr1 is one camera, the processor has {}",
            processor.cameras.len()
        );
    }
    let tokenizer = QwenTokenizer::from_dir(tokenizer_dir)?;
    // A robot calls /predict one request at a time, so latency wins: with a second core, the
    // PNG inflate runs on a helper thread beside the image chain (same floats; the seeded
    // /predict median 0.75–0.84 → 0.43–0.62 ms on the 2-core CI box, see docs/benchmarks.md).
    gr00t_runtime::preprocess::set_overlap_decode(
        std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2),
    );
    let pipeline = HostPipeline::new(
        processor,
        tokenizer,
        policy.dims(),
        settings.max_instruction_tokens(),
    )?;
    let p = &pipeline.processor;
    let backend = policy.backend_name().to_string();
    let info = RuntimeInfo {
        version: settings.version.clone(),
        embodiment: p.embodiment.clone(),
        embodiment_id: p.embodiment_id,
        layout: settings.layout.clone(),
        stage: stage_for(&backend).into(),
        backend,
        dit_backend_requested: settings.dit_backend.clone(),
        policy: settings.policy.clone(),
        weights_repo: settings.weights_repo.clone(),
        weights_revision: settings.weights_revision.clone(),
        model_dir: model_dir.display().to_string(),
        weights_fingerprint: Some(weights_fingerprint(model_dir)?),
        cameras: p.cameras.clone(),
        state_groups: p
            .state_groups
            .iter()
            .map(|g| (g.name.clone(), g.dim))
            .collect(),
        action_groups: p
            .action_groups
            .iter()
            .map(|g| (g.name.clone(), g.dim))
            .collect(),
        action_horizon: p.action_horizon,
        max_instruction_tokens: settings.max_instruction_tokens(),
        warmup_pcc: None,
        build: crate::build_info::BuildInfo::current(),
        n17: None,
    };
    Ok(Runtime::new(pipeline, policy, info))
}

/// The generation of the checkpoint in `model_dir` (its `config.json`), checked against
/// `GR00T_VERSION` when that is set: a contradiction is an error naming both. A config that
/// names neither generation is left to the N1.6 loader (unless N1.7 was asked for), which
/// words its own error as before.
pub fn checkpoint_version(settings: &Settings, model_dir: &Path) -> anyhow::Result<GrootVersion> {
    let requested = settings.version_requested.as_deref();
    match check_version(requested, &model_dir.join("config.json")) {
        Ok(v) => Ok(v),
        Err(e @ (N17ModelError::VersionMismatch { .. } | N17ModelError::UnknownVersion(_))) => {
            Err(e.into())
        }
        Err(_) if requested != Some(VERSION_N17) => Ok(GrootVersion::N16),
        Err(e) => Err(e.into()),
    }
}

/// The runtime for the checkpoint in `model_dir`: N1.6 (policy by `GR00T_DIT_BACKEND`) or
/// N1.7 (the CPU model, [`crate::n17_runtime`]), as its `config.json` says.
pub fn load_runtime(
    settings: &Settings,
    model_dir: &Path,
    tokenizer_dir: &Path,
) -> anyhow::Result<Runtime> {
    match checkpoint_version(settings, model_dir)? {
        GrootVersion::N17 => {
            let settings = n17_settings(settings, model_dir)?;
            crate::n17_runtime::build_n17_runtime(&settings, model_dir, tokenizer_dir)
        }
        GrootVersion::N16 => {
            let policy = load_policy(settings, model_dir)?;
            build_runtime(settings, model_dir, tokenizer_dir, policy)
        }
    }
}

/// Run `GR00T_WARMUP_RUNS` predictions of the demo and check the last one's PCC against the
/// demo's expected actions. Returns the measured PCC (None when nothing was checked).
pub fn warm_up(
    rt: &Runtime,
    settings: &Settings,
    demo: Option<&Demo>,
) -> anyhow::Result<Option<f64>> {
    if settings.warmup_runs == 0 {
        return Ok(None);
    }
    let Some(demo) = demo else {
        if settings.warmup_pcc_min.is_some() {
            bail!(
                "GR00T_WARMUP_PCC_MIN is set but no demo is shipped (GR00T_DEMO_DIR / --demo-dir)"
            );
        }
        tracing::warn!("no demo shipped (GR00T_DEMO_DIR): skipping warm-up and the PCC self-check");
        return Ok(None);
    };
    demo.check_weights(&rt.info)?;
    let body = serde_json::to_vec(&demo.request)?;
    let mut last = None;
    for i in 0..settings.warmup_runs {
        let t = Instant::now();
        let r = rt
            .predict_body(&body)
            .map_err(|e| anyhow::anyhow!("warm-up run {}: {e}", i + 1))?;
        tracing::info!(
            "warm-up {}/{}: {:.1} ms",
            i + 1,
            settings.warmup_runs,
            t.elapsed().as_secs_f64() * 1e3
        );
        last = Some(r);
    }
    let got: Vec<f64> = last
        .unwrap()
        .actions
        .0
        .iter()
        .flat_map(|(_, rows)| rows.iter().flatten().map(|&v| v as f64))
        .collect();
    let want = demo.expected_flat(&rt.info.action_groups)?;
    if got.len() != want.len() {
        bail!(
            "warm-up produced {} action values, the demo expects {}",
            got.len(),
            want.len()
        );
    }
    let p = pcc(&got, &want);
    let min = settings.warmup_pcc_min.unwrap_or(0.999);
    if p < min {
        bail!("warm-up PCC {p:.6} vs the shipped golden is below GR00T_WARMUP_PCC_MIN {min}");
    }
    Ok(Some(p))
}

/// Everything from settings to a warmed-up runtime (what the server runs in the background).
pub fn boot(
    settings: &Settings,
    model_dir_flag: Option<&Path>,
    tokenizer_dir_flag: Option<&Path>,
    demo_dir_flag: Option<&Path>,
) -> anyhow::Result<(Arc<Runtime>, Option<Arc<Demo>>)> {
    let t = Instant::now();
    let model_dir = resolve_model_dir(settings, model_dir_flag)?;
    let tok_dir = resolve_tokenizer_dir(settings, tokenizer_dir_flag, &model_dir)?;
    let demo_dir = resolve_demo_dir(settings, demo_dir_flag, &model_dir);
    let demo = demo_dir.as_deref().map(Demo::load).transpose()?;
    let mut rt = load_runtime(settings, &model_dir, &tok_dir)?;
    tracing::info!(
        "loaded `{}` in {:.1} s",
        model_dir.display(),
        t.elapsed().as_secs_f64()
    );
    let p = warm_up(&rt, settings, demo.as_ref())?;
    rt.info.warmup_pcc = p;
    Ok((Arc::new(rt), demo.map(Arc::new)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(kv: &[(&str, &str)]) -> Settings {
        let vars = kv.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        Settings::from_vars(&vars.collect()).unwrap()
    }

    /// A checkpoint directory whose `processor_config.json` has modality configs for `tags`.
    fn checkpoint(tag: &str, tags: &[&str]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gr00t-boot-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let configs: serde_json::Map<String, serde_json::Value> = tags
            .iter()
            .map(|t| (t.to_string(), serde_json::json!({})))
            .collect();
        let v = serde_json::json!({"processor_kwargs": {"modality_configs": configs}});
        std::fs::write(dir.join("processor_config.json"), v.to_string()).unwrap();
        dir
    }

    #[test]
    fn n17_defaults_to_the_checkpoints_only_embodiment() {
        let dir = checkpoint("one", &["oxe_droid"]);
        let s = n17_settings(&settings(&[]), &dir).unwrap();
        assert_eq!(
            (s.embodiment.as_str(), s.layout.as_str()),
            ("oxe_droid", "dynamic")
        );
        // Asked for: kept as asked (a tag the checkpoint lacks is the loader's to name).
        let asked = settings(&[("GR00T_EMBODIMENT", "new_embodiment")]);
        assert_eq!(n17_settings(&asked, &dir).unwrap(), asked);
        // GR1's layout cannot go with the embodiment picked for it.
        let e = n17_settings(&settings(&[("GR00T_LAYOUT", "gr1")]), &dir).unwrap_err();
        assert!(e.to_string().contains("GR00T_LAYOUT=gr1"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn n17_with_several_embodiments_and_none_asked_names_them() {
        let dir = checkpoint("two", &["libero_sim", "oxe_droid"]);
        let e = n17_settings(&settings(&[]), &dir).unwrap_err().to_string();
        assert!(
            e.contains("GR00T_EMBODIMENT is not set") && e.contains("libero_sim, oxe_droid"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_tokenizer_snapshot_resolves_in_the_hub_cache() {
        let dir = checkpoint("tok", &["x"]);
        let s = settings(&[
            ("HF_HUB_CACHE", dir.to_str().unwrap()),
            ("GR00T_TOKENIZER_REPO", "acme/proc"),
            ("GR00T_TOKENIZER_REVISION", "abc"),
        ]);
        let e = resolve_tokenizer_dir(&s, None, &dir)
            .unwrap_err()
            .to_string();
        assert!(e.contains("GR00T_TOKENIZER_REVISION=abc"), "{e}");
        let snap = dir.join("models--acme--proc/snapshots/abc");
        std::fs::create_dir_all(&snap).unwrap();
        assert_eq!(resolve_tokenizer_dir(&s, None, &dir).unwrap(), snap);
        // The flag still wins.
        assert_eq!(resolve_tokenizer_dir(&s, Some(&dir), &dir).unwrap(), dir);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
