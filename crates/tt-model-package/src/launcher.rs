//! Per-kind decisions that are pure data: the image's default command (the manifest crate's
//! launcher, [`tt_model_manifest::launch`], over the default profile), the kind's own verify
//! checks, the default HTTP stack, and what is excluded from a frozen lock.

use std::collections::BTreeMap;

use tt_model_manifest::launch::{Launch, LaunchRuntime};

use crate::spec::{Kind, PackageSpec, ServeDefault, VerifyStep};

/// The HTTP stack a `tt-dit-server` gets when the author lists no packages.
pub const DIT_DEFAULT_PACKAGES: &[&str] = &["fastapi", "uvicorn", "pydantic>=2", "pillow"];

/// The tt-smi every Python-kind image carries (PyPI `tt-smi`), pinned so a rebuild gets the
/// same one; `tt-model stop` runs its `tt-smi -r` from the image.
pub const TT_SMI_VERSION: &str = "6.8.0";

/// `TT_VLLM_BUILTIN_MODELS` baked into the image: `0` when the model brings its own
/// registration (`extra_models_dir` or `extension`), so the plugin's built-in models stay out
/// of the way; empty (unset by the entrypoint) otherwise.
pub fn tt_vllm_builtin_models(spec: &PackageSpec) -> &'static str {
    let own = spec.runtime.extra_models_dir().is_some() || spec.runtime.extension().is_some();
    if own && matches!(spec.kind, Kind::VllmPlugin | Kind::VllmFork) {
        "0"
    } else {
        ""
    }
}

/// The runtime image's system libraries: the link closure of tt-metal and sfpi's JIT.
pub const APT_PACKAGES: &[&str] = &[
    "libhwloc15",
    "libnuma1",
    "libatomic1",
    "libudev1",
    "libcap2",
    "zlib1g",
    "libmpc3",
    "libmpfr6",
    "libgmp10",
    "libzstd1",
    "libevent-core-2.1-7",
    "libevent-pthreads-2.1-7",
    "libgl1",
    "libsndfile1",
    "ca-certificates",
];

/// The packages a tt-dit-server installs (author's list or the default stack).
pub fn dit_packages(spec: &PackageSpec) -> Vec<String> {
    if spec.runtime.packages().is_empty() {
        DIT_DEFAULT_PACKAGES.iter().map(|s| s.to_string()).collect()
    } else {
        spec.runtime.packages().to_vec()
    }
}

/// The default profile's launcher inputs: the runtime's launch keys, the default profile on
/// its own port.
fn default_launch(spec: &PackageSpec) -> (LaunchRuntime, &ServeDefault) {
    (LaunchRuntime::of(&spec.runtime), &spec.serve)
}

/// The default profile's server argv, as `tt-model serve` runs it.
pub fn serve_argv(spec: &PackageSpec) -> Vec<String> {
    let (runtime, serve) = default_launch(spec);
    launch(spec, &runtime, serve).argv()
}

/// The default profile's environment, sorted (kind env first, the profile's env wins).
pub fn serve_env(spec: &PackageSpec) -> BTreeMap<String, String> {
    let (runtime, serve) = default_launch(spec);
    launch(spec, &runtime, serve).env()
}

fn launch<'a>(
    spec: &'a PackageSpec,
    runtime: &'a LaunchRuntime,
    serve: &'a ServeDefault,
) -> Launch<'a> {
    Launch {
        kind: spec.kind,
        weights: &spec.weights,
        runtime,
        serve,
        port: serve.port,
    }
}

/// A Python string literal for `s` (JSON string syntax is valid Python for any text).
fn py(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

/// The check that OpenMPI ULFM in `dir` is what the runtime image's loader finds: its
/// `lib` is on `LD_LIBRARY_PATH`, `libmpi.so.40` is there with every dependency resolved, and
/// no tt-metal library resolves a `libmpi` from elsewhere (a system libmpi without the ULFM
/// symbols fails at load with `undefined symbol: MPIX_Comm_revoke`). Without `ldd` in the
/// image only the first two are checked.
pub fn openmpi_check(dir: &str) -> VerifyStep {
    let lib = crate::shell::quote(&format!("{dir}/lib"));
    VerifyStep::sh(format!(
        "lib={lib}; \
         case \":${{LD_LIBRARY_PATH:-}}:\" in *\":$lib:\"*) ;; *) echo \"$lib is not on LD_LIBRARY_PATH (${{LD_LIBRARY_PATH:-}})\"; exit 1;; esac; \
         test -e \"$lib/libmpi.so.40\" || {{ echo \"$lib/libmpi.so.40 is missing\"; exit 1; }}; \
         if command -v ldd >/dev/null 2>&1; then \
         if ldd \"$lib/libmpi.so.40\" | grep \"not found\"; then echo \"libmpi.so.40 has unresolved dependencies\"; exit 1; fi; \
         for f in /opt/tt-metal/build/lib/*.so; do [ -e \"$f\" ] || continue; \
         if ldd \"$f\" | grep libmpi | grep -v \"=> $lib/\"; then echo \"$f resolves libmpi outside $lib\"; exit 1; fi; done; fi"
    ))
}

/// The kind's own checks, run before the author's `verify:` entries.
///
/// The torch checks (CPU build, tt-metal's pin) need the pin: torch is installed from
/// tt-metal's pin (or the author's lock), and a tree that pins no torch (the fixtures here:
/// download.pytorch.org is unreachable) installs none, so it is not checked either.
pub fn kind_checks(spec: &PackageSpec, torch_pin: Option<&str>) -> Vec<VerifyStep> {
    let launch_runtime = LaunchRuntime::of(&spec.runtime);
    let mut checks = Vec::new();
    let torch_cpu = "import torch; assert torch.__version__.endswith(\"+cpu\"), \
                     \"torch is not the CPU build: \" + torch.__version__";
    let pin_check = |pin: &str| {
        VerifyStep::Python(format!(
            "import torch; assert torch.__version__.split(\"+\")[0] == {pin}, \
             \"torch \" + torch.__version__ + \" does not match tt-metal's pin \" + {pin}",
            pin = py(pin)
        ))
    };
    match spec.kind {
        Kind::VllmPlugin => {
            checks.push(VerifyStep::Python(
                "import ttnn, vllm, vllm_tt_plugin".into(),
            ));
            if torch_pin.is_some() {
                checks.push(VerifyStep::Python(torch_cpu.into()));
            }
            checks.push(VerifyStep::Python(
                "import vllm; assert \"/tt-metal/\" not in vllm.__file__, \
                 \"vllm resolves inside tt-metal: \" + vllm.__file__"
                    .into(),
            ));
            if let Some(pin) = torch_pin {
                checks.push(pin_check(pin));
            }
        }
        Kind::VllmFork => {
            checks.push(VerifyStep::Python("import ttnn, vllm".into()));
            checks.push(VerifyStep::Python(
                "import vllm; assert vllm.__file__.startswith(\"/opt/vllm\"), vllm.__file__".into(),
            ));
            checks.push(VerifyStep::Python(
                "import models.common.readiness_check.run_vllm_server".into(),
            ));
            if let Some(pin) = torch_pin {
                checks.push(pin_check(pin));
            }
        }
        Kind::TtDitServer => {
            checks.push(VerifyStep::Python("import ttnn".into()));
            checks.push(VerifyStep::Python(
                "import fastapi, uvicorn, pydantic".into(),
            ));
            if torch_pin.is_some() {
                checks.push(VerifyStep::Python(torch_cpu.into()));
            }
            if let Some(pin) = torch_pin {
                checks.push(pin_check(pin));
            }
            if let Some((module, attr)) = launch_runtime
                .app
                .as_deref()
                .and_then(|a| a.split_once(':'))
            {
                checks.push(VerifyStep::Python(format!(
                    "import importlib; m = importlib.import_module({m}); \
                     assert hasattr(m, {a}), {m} + \" has no attribute \" + {a}",
                    m = py(module),
                    a = py(attr)
                )));
            }
        }
        Kind::HttpServer => {
            checks.push(VerifyStep::sh("test -d /opt/tt-metal/build/lib"));
            for entry in &spec.code {
                checks.push(VerifyStep::sh(format!(
                    "test -r {}",
                    crate::shell::quote(&format!("/opt/tt-metal/{entry}"))
                )));
            }
            if let Some(program) = launch_runtime.command.first()
                && !program.contains('{')
            {
                checks.push(VerifyStep::sh(format!(
                    "command -v {}",
                    crate::shell::quote(program)
                )));
            }
        }
    }
    if spec.needs_python() && spec.kind == Kind::HttpServer {
        checks.push(VerifyStep::Python(
            "import sys; assert sys.prefix == \"/opt/tt-venv\", sys.prefix".into(),
        ));
    }
    checks
}

/// Distributions a frozen lock never pins: they come from the tree or the engine source.
pub fn lock_excludes(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::VllmPlugin => &["ttnn", "vllm", "vllm-tt-plugin"],
        Kind::VllmFork => &["ttnn", "vllm", "vllm-tt-plugin"],
        Kind::TtDitServer | Kind::HttpServer => &["ttnn"],
    }
}
