//! `tt-model schema`: print (or write) the JSON Schema of `tt-model.yaml`.

use anyhow::Context as _;

use crate::ExitStatus;
use crate::args::SchemaArgs;
use crate::printer::Printer;

/// Runs `tt-model schema`.
pub fn run(args: &SchemaArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let text = tt_model_manifest::schema::json_schema_string();
    match &args.out {
        None => printer.out_raw(&text),
        Some(path) => {
            // Write beside the target, then rename: a reader never sees half a schema.
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."));
            let tmp = dir.join(format!(
                ".{}.tmp-{}",
                path.file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or("schema.json"),
                std::process::id()
            ));
            std::fs::write(&tmp, &text)
                .with_context(|| format!("cannot write `{}`", tmp.display()))?;
            std::fs::rename(&tmp, path)
                .with_context(|| format!("cannot move the schema to `{}`", path.display()))?;
            printer.done(&format!("wrote {}", path.display()), None);
        }
    }
    Ok(ExitStatus::Success)
}
