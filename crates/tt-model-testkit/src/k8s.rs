//! Kubernetes renderings in tests (`serve --print k8s`, `tt-model-fleet`): check them against
//! Kubernetes' published schemas with the PyPI `kubernetes-validate` (bundled schemas,
//! offline), as CI does.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The variable naming the validator; its default is where `scripts/setup.sh` installs it.
pub const VALIDATOR_ENV: &str = "TT_MODEL_K8S_VALIDATE";
/// The Kubernetes version whose schemas the fleet is checked against (k8s-openapi's `v1_34`:
/// the first with `resource.k8s.io/v1`, which a DRA fleet's claims use).
pub const KUBERNETES_VERSION: &str = "1.34.0";

/// `$TT_MODEL_K8S_VALIDATE`, else `~/.cache/tt-model-ci/k8s-venv/bin/kubernetes-validate`.
pub fn validator() -> PathBuf {
    if let Some(p) = std::env::var_os(VALIDATOR_ENV) {
        return PathBuf::from(p);
    }
    let home = std::env::var_os("HOME").unwrap_or_default();
    PathBuf::from(home).join(".cache/tt-model-ci/k8s-venv/bin/kubernetes-validate")
}

/// The validator, or `None` (with the reason printed) where it is not installed; under `CI` a
/// missing validator is a panic, never a skip.
pub fn validator_or_skip() -> Option<PathBuf> {
    let path = validator();
    if path.is_file() {
        return Some(path);
    }
    let why = format!(
        "kubernetes-validate not found at {} (scripts/setup.sh installs it; {VALIDATOR_ENV} names another)",
        path.display()
    );
    assert!(std::env::var_os("CI").is_none(), "{why}");
    #[allow(clippy::print_stderr)] // the skip must be visible in the test output
    {
        eprintln!("skipped: {why}");
    }
    None
}

/// Run `kubernetes-validate --strict` for [`KUBERNETES_VERSION`] on a multi-document YAML;
/// `Err` holds its report.
pub fn validate(validator: &std::path::Path, yaml: &str) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!(
        "tt-model-fleet-validate-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let file = dir.join("fleet.yaml");
    std::fs::File::create(&file)
        .and_then(|mut f| f.write_all(yaml.as_bytes()))
        .map_err(|e| e.to_string())?;
    let out = Command::new(validator)
        .args(["--strict", "--kubernetes-version", KUBERNETES_VERSION])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", validator.display()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // An object whose kind or apiVersion has no schema at that version is only a warning to
    // the validator (exit 0), which would let a misspelt or too-new object through.
    if out.status.success() && !report.contains("Couldn't find schema") {
        Ok(report)
    } else {
        Err(report)
    }
}
