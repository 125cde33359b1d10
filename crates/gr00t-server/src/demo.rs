//! The shipped demo: one `/predict` body and the actions it must produce.
//!
//! A demo directory holds `request.json` (a `/predict` body) and `expected.json`
//! (`{"actions": {group: [[...]]}, "produced_by": {...}}`). `GET /demo` serves both, and the
//! boot self-check runs the request `GR00T_WARMUP_RUNS` times and compares the last actions
//! with `expected` (PCC ≥ `GR00T_WARMUP_PCC_MIN`).
//!
//! Expected actions belong to one set of weights, so `gr00t-server demo` writes them with
//! their provenance (backend, weights revision, weights fingerprint) and the boot refuses a
//! demo made for other weights with that reason, instead of failing on a meaningless PCC.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};

use crate::runtime::{Runtime, RuntimeInfo};

/// A demo request and its expected actions.
#[derive(Debug, Clone)]
pub struct Demo {
    /// The `/predict` body (`request.json`).
    pub request: serde_json::Value,
    /// `{"actions": {group: [[...]]}}`, optionally with `produced_by` (other keys ignored).
    pub expected: serde_json::Value,
}

/// How much of each safetensors file the fingerprint reads: the header and the first tensors'
/// data, enough to tell two checkpoints (a fine-tune changes every tensor) apart without
/// hashing gigabytes at boot.
const FINGERPRINT_PREFIX: u64 = 1 << 20;

/// A quick identity of the weights in `model_dir`: sha256 over `config.json` and, per
/// `*.safetensors` file in name order, its name, size and first MiB. Not a content hash of
/// every byte (the HF revision is that); it only has to tell checkpoints apart.
pub fn weights_fingerprint(model_dir: &Path) -> anyhow::Result<String> {
    let mut h = Sha256::new();
    let cfg = model_dir.join("config.json");
    h.update(std::fs::read(&cfg).with_context(|| format!("cannot read `{}`", cfg.display()))?);
    let mut files: Vec<PathBuf> = std::fs::read_dir(model_dir)
        .with_context(|| format!("cannot list `{}`", model_dir.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    files.sort();
    for f in files {
        let file =
            std::fs::File::open(&f).with_context(|| format!("cannot open `{}`", f.display()))?;
        let len = file.metadata()?.len();
        h.update(f.file_name().unwrap_or_default().as_encoded_bytes());
        h.update(len.to_le_bytes());
        let mut prefix = Vec::with_capacity(FINGERPRINT_PREFIX.min(len) as usize);
        file.take(FINGERPRINT_PREFIX).read_to_end(&mut prefix)?;
        h.update(&prefix);
    }
    Ok(format!("{:x}", h.finalize()))
}

impl Demo {
    /// `request.json` + `expected.json` from a directory (errors name the file, line, column).
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let read = |f: &str| -> anyhow::Result<serde_json::Value> {
            let p = dir.join(f);
            let text = std::fs::read_to_string(&p)
                .with_context(|| format!("demo file `{}`", p.display()))?;
            serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("`{}`:{}:{}: {e}", p.display(), e.line(), e.column()))
        };
        Ok(Self {
            request: read("request.json")?,
            expected: read("expected.json")?,
        })
    }

    /// Run `request` on `rt` and keep its actions as the expected ones, with their provenance.
    pub fn produce(rt: &Runtime, request: serde_json::Value) -> anyhow::Result<Self> {
        let body = serde_json::to_vec(&request)?;
        let resp = rt
            .predict_body(&body)
            .map_err(|e| anyhow::anyhow!("the demo request fails: {e}"))?;
        let i = &rt.info;
        let expected = serde_json::json!({
            "actions": resp.actions,
            "produced_by": {
                "backend": i.backend,
                "version": i.version,
                "embodiment": i.embodiment,
                "weights_repo": i.weights_repo,
                "weights_revision": i.weights_revision,
                "weights_fingerprint": i.weights_fingerprint,
                "seed": resp.seed,
                "gr00t_server": env!("CARGO_PKG_VERSION"),
            }
        });
        Ok(Self { request, expected })
    }

    /// Write `request.json` + `expected.json` as `dir`, atomically: a sibling temp directory
    /// is filled and renamed into place, so a reader never sees half a demo and a failed
    /// write leaves the previous demo as it was.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let parent = match dir.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent)
            .with_context(|| format!("cannot create `{}`", parent.display()))?;
        let name = dir.file_name().context("the demo directory needs a name")?;
        let tag = format!("{}.{}", name.to_string_lossy(), std::process::id());
        let tmp = parent.join(format!(".{tag}.tmp"));
        let old = parent.join(format!(".{tag}.old"));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir(&tmp).with_context(|| format!("cannot create `{}`", tmp.display()))?;
        let result = (|| -> anyhow::Result<()> {
            for (f, v) in [
                ("request.json", &self.request),
                ("expected.json", &self.expected),
            ] {
                let p = tmp.join(f);
                std::fs::write(&p, serde_json::to_vec_pretty(v)?)
                    .with_context(|| format!("cannot write `{}`", p.display()))?;
            }
            if dir.exists() {
                std::fs::rename(dir, &old).with_context(|| {
                    format!("cannot move the old demo `{}` aside", dir.display())
                })?;
            }
            std::fs::rename(&tmp, dir)
                .with_context(|| format!("cannot rename into `{}`", dir.display()))?;
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&tmp);
            if old.exists() && !dir.exists() {
                let _ = std::fs::rename(&old, dir);
            }
        }
        let _ = std::fs::remove_dir_all(&old);
        result
    }

    /// Refuse a demo whose expected actions were produced for other weights (when it says).
    pub fn check_weights(&self, info: &RuntimeInfo) -> anyhow::Result<()> {
        let Some(by) = self.expected.get("produced_by") else {
            return Ok(());
        };
        let field = |k: &str| by.get(k).and_then(|v| v.as_str());
        if let (Some(want), Some(have)) = (
            field("weights_fingerprint"),
            info.weights_fingerprint.as_deref(),
        ) && want != have
        {
            bail!(
                "the demo's expected actions were produced for other weights (fingerprint {}…, this server loaded {}… from `{}`): regenerate them with `gr00t-server demo`",
                &want[..want.len().min(12)],
                &have[..have.len().min(12)],
                info.model_dir
            );
        }
        if let (Some(want), Some(have)) =
            (field("weights_revision"), info.weights_revision.as_deref())
            && want != have
        {
            bail!(
                "the demo's expected actions were produced for weights revision {want}, this server loaded {have}: regenerate them with `gr00t-server demo`"
            );
        }
        Ok(())
    }

    /// The expected actions flattened in `groups` order.
    pub fn expected_flat(&self, groups: &[(String, usize)]) -> anyhow::Result<Vec<f64>> {
        let acts = self
            .expected
            .get("actions")
            .context("demo expected.json has no `actions`")?;
        let mut out = vec![];
        for (g, _) in groups {
            let rows = acts
                .get(g)
                .and_then(|v| v.as_array())
                .with_context(|| format!("demo expected.json lacks `actions.{g}`"))?;
            for r in rows {
                for x in r
                    .as_array()
                    .with_context(|| format!("`actions.{g}` rows must be arrays"))?
                {
                    out.push(
                        x.as_f64()
                            .with_context(|| format!("`actions.{g}` holds a non-number"))?,
                    );
                }
            }
        }
        Ok(out)
    }
}
