//! `tt-model profiles <target> [--json]`: the serve profiles of a pulled or staged package, as
//! the original lists them (`tt model profiles` shows this output as it is): one row per
//! profile in manifest order, the default marked `(default)`, then `hardware · mesh` and
//! `seqs N · len M`, and the profile's description where the author wrote one. One image
//! serves every profile; `serve --profile <name>` picks one.

use serde_json::json;
use tt_model_local::Local;
use tt_model_local::package::Package;
use tt_model_local::target;

use crate::ExitStatus;
use crate::args::ProfilesArgs;
use crate::printer::Printer;

/// One row's cells: name (with the default mark), where it runs, its engine limits, its
/// description.
pub(crate) fn rows(pkg: &Package) -> Vec<[String; 4]> {
    let described = &pkg.wire().container.serve_profiles;
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    pkg.profiles
        .iter()
        .map(|p| {
            let s = &p.settings;
            let default = p.name == pkg.default_profile;
            [
                format!("• {}{}", p.name, if default { " (default)" } else { "" }),
                format!(
                    "{} · {}",
                    s.hardware.as_deref().unwrap_or("?"),
                    s.mesh_device.as_deref().unwrap_or("?")
                ),
                // The original prints Python's `None` for an unset max_num_seqs (every
                // non-vLLM kind); `-` says the same, as it already does for the length.
                format!(
                    "seqs {} · len {}",
                    dash(s.max_num_seqs.map(|n| n.to_string())),
                    dash(s.max_model_len.map(|n| n.to_string()))
                ),
                described
                    .iter()
                    .find(|d| d.name == p.name)
                    .and_then(|d| d.description.clone())
                    .unwrap_or_default(),
            ]
        })
        .collect()
}

/// The rows as a table indented two spaces, columns two apart, no trailing blanks.
pub(crate) fn table(rows: &[[String; 4]]) -> Vec<String> {
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let widths = [width(0), width(1), width(2)];
    rows.iter()
        .map(|r| {
            let mut line = String::from("  ");
            for (i, w) in widths.iter().enumerate() {
                line.push_str(&r[i]);
                line.push_str(&" ".repeat(w - r[i].chars().count() + 2));
            }
            line.push_str(&r[3]);
            line.trim_end().to_string()
        })
        .collect()
}

/// Runs `tt-model profiles`.
pub fn run(args: &ProfilesArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let pkg = target::resolve(local, &args.target)?;
    let rows = rows(&pkg);
    if args.json {
        let list: Vec<serde_json::Value> = pkg
            .profiles
            .iter()
            .map(|p| {
                let s = &p.settings;
                json!({
                    "name": p.name,
                    "default": p.name == pkg.default_profile,
                    "hardware": s.hardware,
                    "mesh_device": s.mesh_device,
                    "chips": p.chip_count(),
                    "max_num_seqs": s.max_num_seqs,
                    "max_model_len": s.max_model_len,
                    "description": pkg.wire().container.serve_profiles.iter()
                        .find(|d| d.name == p.name).and_then(|d| d.description.clone()),
                })
            })
            .collect();
        printer.out(&serde_json::to_string_pretty(&list)?);
        return Ok(ExitStatus::Success);
    }
    for line in table(&rows) {
        printer.out(&line);
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_marked() {
        let dir = std::env::temp_dir().join(format!("tt-model-profiles-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = dir.join("tt_kernel_manifest.json");
        let doc = json!({"schema_version": "5.1", "name": "m", "arch": "blackhole",
            "container": {"image": {"registry": "hf", "repository": "m"}, "kind": "vllm-plugin",
            "serve": {"max_num_seqs": 32, "block_size": 64},
            "serve_profiles": [
                {"name": "latency", "hardware": "p150", "mesh_device": "P150", "max_model_len": 8192},
                {"name": "capacity", "hardware": "p150x4", "mesh_device": "P150x4",
                 "description": "four cards"}],
            "default_profile": "capacity"}});
        std::fs::write(&m, doc.to_string()).unwrap();
        let pkg = Package::load(&m).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            table(&rows(&pkg)),
            vec![
                "  • latency             p150 · P150      seqs 32 · len 8192",
                "  • capacity (default)  p150x4 · P150x4  seqs 32 · len -     four cards",
            ]
        );
    }
}
