//! `tt-model package` arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

/// Build a container package from an authoring manifest.
///
/// Stages the tt-metal tree and the code allowlist, builds the image on the container engine,
/// verifies it inside the finished image (uid 1000, no network, no devices, no weights), and
/// writes `<ROOT>/<name>/`: the OCI layout (`image/`), `code/`, `requirements.lock`, the model
/// card (`README.md`) and `tt_kernel_manifest.json`. Re-packaging unchanged inputs reuses the
/// engine's layer cache and the previous export.
///
/// Example: `tt-model package --container examples/minimal-http/tt-model.yaml --out /tmp/pkgs`
#[derive(Debug, Args)]
pub struct PackageArgs {
    /// The authoring manifest (`tt-model.yaml`).
    #[arg(long, value_name = "YAML")]
    pub container: PathBuf,
    /// The staging root; the package lands in `<ROOT>/<name>/`. Inside a git checkout it gets
    /// a `.gitignore` of `*`; a folder holding tracked files is refused.
    #[arg(long, value_name = "ROOT", default_value = "build")]
    pub out: PathBuf,
    /// Use this local image for every build stage instead of the tt-metalium dev image and
    /// `ubuntu:<release>`; it must already carry the runtime libraries (no apt step runs).
    #[arg(long, value_name = "REF")]
    pub base_image: Option<String>,
    /// Network for the build's RUN steps: `none` (hermetic), `host`, or the engine default.
    #[arg(long, value_name = "MODE")]
    pub build_network: Option<String>,
    /// Rebuild every layer instead of reusing the engine's layer cache.
    #[arg(long)]
    pub no_cache: bool,
    /// When to pull the base images through the engine (credentials from the Docker config,
    /// as `docker login` stores them): `missing` pulls only what the engine lacks, `always`
    /// refreshes them, `never` refuses a base the engine lacks.
    #[arg(long, value_name = "WHEN", value_enum, default_value = "missing")]
    pub pull: PullArg,
    /// The engine's builder: `buildkit`, whose tt-metal build step keeps ccache and CPM's
    /// sources in a cache mount between packages (needs the engine's local socket), `classic`,
    /// or `auto`: BuildKit on a local socket, else classic.
    #[arg(long, value_name = "BUILDER", value_enum, default_value = "auto")]
    pub builder: BuilderArg,
}

/// `--builder`'s values (described in the flag's help).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BuilderArg {
    // BuildKit on a local socket, else classic.
    #[allow(missing_docs)]
    Auto,
    // The classic builder.
    #[allow(missing_docs)]
    Classic,
    // BuildKit, with the tt-metal build cache.
    #[allow(missing_docs)]
    Buildkit,
}

/// `--pull`'s values (described in the flag's help; doc comments here would switch the whole
/// help page to clap's long layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PullArg {
    // Never pull; a base the engine lacks is an error.
    #[allow(missing_docs)]
    Never,
    // Pull only a base the engine lacks.
    #[allow(missing_docs)]
    Missing,
    // Pull every base before building.
    #[allow(missing_docs)]
    Always,
}
