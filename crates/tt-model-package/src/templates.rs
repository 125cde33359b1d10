//! Renders the build files (Dockerfile and scripts) from `templates/` with minijinja.
//!
//! `render` is pure: the same spec and options give byte-identical files, which the snapshot
//! tests pin for every kind. Every authored value that reaches a shell goes through the `sh`
//! filter ([`crate::shell::quote`]).

use std::collections::BTreeMap;

use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior, Value, context};

use crate::error::{FieldError, PackageError};
use crate::launcher;
use crate::spec::{PackageSpec, RuntimeSpec, VerifyStep};

/// Template sources, embedded so the binary needs no data files.
const TEMPLATES: &[(&str, &str)] = &[
    (
        "Dockerfile",
        include_str!("../../../templates/Dockerfile.j2"),
    ),
    ("prep.sh", include_str!("../../../templates/prep.sh.j2")),
    (
        "build_tt_metal.sh",
        include_str!("../../../templates/build_tt_metal.sh.j2"),
    ),
    (
        "install_engine.sh",
        include_str!("../../../templates/install_engine.sh.j2"),
    ),
    (
        "runtime_setup.sh",
        include_str!("../../../templates/runtime_setup.sh.j2"),
    ),
    ("verify.sh", include_str!("../../../templates/verify.sh.j2")),
    (
        "serve-default.sh",
        include_str!("../../../templates/serve-default.sh.j2"),
    ),
];

/// The static entrypoint script.
const ENTRYPOINT: &str = include_str!("../../../templates/entrypoint.sh");

/// Choices that are not in the manifest.
#[derive(Debug, Clone, Default)]
pub struct RenderOptions {
    /// The tt-model version written into the generated headers.
    pub tool_version: String,
    /// tt-metal's torch pin, read from the tree.
    pub torch_pin: Option<String>,
    /// Whether the runtime base is stock Ubuntu that needs the apt closure installed (false
    /// for a `--base-image` that already carries it).
    pub install_apt: bool,
    /// Whether the build context carries an author's `requirements.lock`.
    pub has_lock: bool,
    /// OpenMPI ULFM's directory when the builder base carries it: copied into the runtime
    /// image, its `lib` put on `LD_LIBRARY_PATH` and checked by verify.
    pub openmpi: Option<String>,
    /// BuildKit builds it: the tt-metal build step gets the build-cache mount, and every stage
    /// declares `TT_MODEL_REBUILD` (what `--no-cache` changes there).
    pub build_cache: bool,
}

/// The rendered build files, keyed by their path in the build context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedFiles {
    /// File contents keyed by path in the build context (`tt-model/Dockerfile`,
    /// `tt-model/entrypoint.sh`, …).
    pub files: BTreeMap<String, String>,
    /// The checks `verify.sh` runs, in order (kind checks, then the author's).
    pub checks: Vec<VerifyStep>,
}

/// The context path of the Dockerfile.
pub const DOCKERFILE: &str = "tt-model/Dockerfile";

/// The minijinja setup every template of this crate uses (build files and the card): the
/// default delimiters, and a file's trailing newline kept.
pub(crate) fn base_environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .keep_trailing_newline(true)
            .build()
            .expect("the default delimiters are valid"),
    );
    env
}

fn environment() -> Result<Environment<'static>, PackageError> {
    let mut env = base_environment();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.add_filter("sh", |value: String| crate::shell::quote(&value));
    for (name, source) in TEMPLATES {
        env.add_template(name, source)
            .map_err(|e| PackageError::Template {
                name: name.to_string(),
                detail: format!("{e:#}"),
            })?;
    }
    Ok(env)
}

/// The `runtime` keys the build templates read: the engine sources (in
/// [`tt_model_manifest::ComponentSource`]'s `{from, …}` form), the pip inputs and the
/// `runtime.cargo` binary's name and path in the image. Keys a kind lacks are null or empty,
/// so a template can test any of them (undefined is an error here).
fn runtime_view(rt: &RuntimeSpec) -> Value {
    let cargo = rt.cargo().map(|c| {
        context! {
            bin => c.bin_name(),
            image_path => c.image_path(),
        }
    });
    context! {
        vllm => Value::from(Serde(rt.vllm())),
        plugin => Value::from(Serde(rt.plugin())),
        extension => rt.extension(),
        overrides => rt.overrides().to_vec(),
        wheels => rt.wheels().to_vec(),
        packages => rt.packages().to_vec(),
        cargo => cargo,
    }
}

/// A check as `verify.sh`'s template reads it: `{lang, code}`.
fn check_view(check: &VerifyStep) -> Value {
    context! {
        lang => check.lang(),
        code => check.text(),
    }
}

/// Renders every build file for `spec`.
pub fn render(spec: &PackageSpec, options: &RenderOptions) -> Result<RenderedFiles, PackageError> {
    let env = environment()?;
    let serve_env = launcher::serve_env(spec);
    if let Some(bad) = serve_env.keys().find(|k| !crate::shell::is_env_name(k)) {
        return Err(FieldError::new(
            "invalid-value",
            "serve.env",
            format!("serve env key `{bad}` is not a valid environment variable name"),
        )
        .into());
    }
    let mut checks = launcher::kind_checks(spec, options.torch_pin.as_deref());
    if let Some(dir) = &options.openmpi {
        checks.push(launcher::openmpi_check(dir));
    }
    checks.extend(spec.verify.iter().cloned());
    let ctx = context! {
        tool_version => options.tool_version.clone(),
        name => spec.name.clone(),
        kind => spec.kind.as_str(),
        python => spec.python.clone(),
        needs_python => spec.needs_python(),
        has_lock => options.has_lock,
        openmpi => options.openmpi.clone(),
        build_cache => options.build_cache,
        torch_pin => options.torch_pin.clone(),
        tt_smi_version => launcher::TT_SMI_VERSION,
        tt_vllm_builtin_models => launcher::tt_vllm_builtin_models(spec),
        runtime => runtime_view(&spec.runtime),
        packages => launcher::dit_packages(spec),
        apt_packages => if options.install_apt { launcher::APT_PACKAGES.to_vec() } else { Vec::new() },
        checks => checks.iter().map(check_view).collect::<Vec<_>>(),
        env => serve_env,
        argv => launcher::serve_argv(spec),
        port => spec.serve.port,
        profile => spec.serve.name.clone(),
    };
    let mut files = BTreeMap::new();
    for (name, _) in TEMPLATES {
        let text = env
            .get_template(name)
            .and_then(|t| t.render(&ctx))
            .map_err(|e| PackageError::Template {
                name: name.to_string(),
                detail: format!("{e:#}"),
            })?;
        files.insert(format!("tt-model/{name}"), text);
    }
    files.insert("tt-model/entrypoint.sh".into(), ENTRYPOINT.to_string());
    Ok(RenderedFiles { files, checks })
}
