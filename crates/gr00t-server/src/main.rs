//! `gr00t-server`: serve GR00T N1.6 (or N1.7, by the checkpoint's config) over HTTP, or run
//! one request with `predict`.

// A binary: its answers (`predict`, `plan`) go to stdout and its refusals to stderr; the
// libraries below it report through return values.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use gr00t_server::settings::Settings;
use gr00t_server::state::AppState;
use gr00t_server::{boot, ready_line, routes};

#[derive(Parser)]
#[command(
    name = "gr00t-server",
    version,
    about = "GR00T N1.6 / N1.7 inference server (configuration: GR00T_* / TT_* / HF_HOME environment)"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    host: String,
    /// Port to listen on.
    #[arg(long, default_value_t = 20000)]
    port: u16,
    #[command(flatten)]
    model: ModelArgs,
    /// Demo directory with request.json + expected.json (overrides GR00T_DEMO_DIR).
    #[arg(long)]
    demo_dir: Option<PathBuf>,
}

/// Where the model and its tokenizer are: shared by the server and every subcommand that
/// loads the model.
#[derive(Args)]
struct ModelArgs {
    /// Checkpoint directory (instead of the HF cache snapshot at TT_WEIGHTS_REVISION).
    #[arg(long)]
    model_dir: Option<PathBuf>,
    /// Tokenizer directory, for N1.7 the backbone's processor files (overrides
    /// GR00T_TOKENIZER_DIR and GR00T_TOKENIZER_REPO; default `<model-dir>/tokenizer`).
    #[arg(long)]
    tokenizer_dir: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one /predict request without HTTP and print the JSON /predict would return.
    Predict {
        #[command(flatten)]
        model: ModelArgs,
        /// A /predict request body.
        #[arg(long)]
        request: PathBuf,
        /// Also write the forward's measured device traffic to FILE as JSON:
        /// `{"device": {"programs_per_step", "host_to_device_bytes_per_step",
        /// "device_to_host_bytes_per_step", "steps", ...}}`; `{"device": null}` for a backend
        /// without a device (the CPU reference, the emulator).
        #[arg(long, value_name = "FILE")]
        stats_json: Option<PathBuf>,
        /// Run the request N times and print (and count, for --stats-json) the last: the first
        /// forward on a device pays its set-up (arenas, constants, graphs built and kept), the
        /// later ones are what serving costs.
        #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        runs: u32,
    },
    /// Make a demo directory (request.json + expected.json) by running REQUEST on the f32 CPU
    /// reference: the golden that a device backend's boot self-check (GR00T_WARMUP_PCC_MIN)
    /// compares its warm-up actions with. The expected actions record the weights they belong to.
    Demo {
        #[command(flatten)]
        model: ModelArgs,
        /// A /predict body (give `noise` or `seed` so the demo is reproducible; default seed 42).
        #[arg(long)]
        request: PathBuf,
        /// The demo directory to write (replaced atomically).
        #[arg(long)]
        out: PathBuf,
        /// Backend producing the expected actions (the reference is `cpu`).
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "megakernel"])]
        backend: String,
    },
    /// Write a deterministic random N1.6 (or N1.7) checkpoint in the real file layout (sharded
    /// safetensors + index, configs, processor files and statistics, a tokenizer, and a demo
    /// whose expected actions this build's f32 CPU reference made), for trying the runtime or a
    /// packaged image without the Hub or the real weights. The weights are random: the actions
    /// mean nothing.
    MakeCheckpoint {
        /// The architecture (`tiny`: every structural switch of N1.6-3B at toy widths, GR1;
        /// `n17-tiny`: every structural switch of N1.7-3B at toy widths, a DROID embodiment).
        #[arg(long, default_value = "tiny", value_parser = gr00t_server::checkpoint::CONFIGS)]
        config: String,
        /// Seed of the weights, statistics and demo.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The directory to write (replaced atomically).
        #[arg(long)]
        out: PathBuf,
        /// Copy these tokenizer files (vocab.json, merges.txt, tokenizer_config.json, ...) into
        /// `tokenizer/` instead of writing the byte-level stand-in. For `n17-tiny` these are the
        /// backbone's processor files, its config.json (which sets the backbone's widths), chat
        /// template and preprocessor_config.json included.
        #[arg(long)]
        tokenizer_dir: Option<PathBuf>,
        /// Safetensors shards.
        #[arg(long, default_value_t = 2)]
        shards: usize,
    },
    /// Print the Blackhole megakernel plan of the DiT (110-core grid: readers, compute cores,
    /// circular buffers, L1 budget, runtime args) and its roofline, then the roofline of the
    /// whole forward per stage (vision, adapter, llm, denoise) beside the seed's measurements.
    Plan {
        /// The whole plan as JSON instead of the roofline report.
        #[arg(long)]
        json: bool,
        /// Plan for this checkpoint's config (default: the full-size N1.6-3B config).
        #[arg(long)]
        model_dir: Option<PathBuf>,
        /// Arena dtype: bfp8_b, bfp4_b or bf16 (default: GR00T_MK_ARENA_DTYPE, else bfp8_b).
        #[arg(long)]
        dtype: Option<String>,
        /// VL context tokens the cross-attention blocks are cut for.
        #[arg(long, default_value_t = 128)]
        ctx_tokens: usize,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        // A closed stderr (a log reader that went away) must not panic the thread that logs:
        // the device supervisor logs every loss.
        .log_internal_errors(false)
        // Colour only on a terminal: a container's log or a file gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("gr00t-server: refusing to boot: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.cmd {
        Some(Cmd::Predict {
            model,
            request,
            stats_json,
            runs,
        }) => predict(&settings, &model, &request, stats_json.as_deref(), runs),
        Some(Cmd::Demo {
            model,
            request,
            out,
            backend,
        }) => make_demo(settings, &model, &request, &out, backend),
        Some(Cmd::Plan {
            json,
            model_dir,
            dtype,
            ctx_tokens,
        }) => plan(
            &settings,
            json,
            model_dir.as_deref(),
            dtype.as_deref(),
            ctx_tokens,
        ),
        Some(Cmd::MakeCheckpoint {
            config,
            seed,
            out,
            tokenizer_dir,
            shards,
        }) => gr00t_server::checkpoint::make_checkpoint(
            &config,
            seed,
            &out,
            tokenizer_dir.as_deref(),
            shards,
        )
        .map(|w| {
            eprintln!(
                "wrote {} ({config}, seed {seed}: {} tensors, {:.1} MB)",
                w.dir.display(),
                w.tensors,
                w.bytes as f64 / 1e6
            );
            ExitCode::SUCCESS
        }),
        None => serve(
            settings,
            cli.host,
            cli.port,
            cli.model.model_dir,
            cli.model.tokenizer_dir,
            cli.demo_dir,
        ),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gr00t-server: {}", format!("{e:#}").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

/// The model of `--model-dir` (else the HF cache snapshot) with its tokenizer, for one-shot
/// subcommands (no warm-up, no demo).
fn runtime_for(
    settings: &Settings,
    model: &ModelArgs,
) -> anyhow::Result<gr00t_server::runtime::Runtime> {
    let model_dir = boot::resolve_model_dir(settings, model.model_dir.as_deref())?;
    let tok_dir =
        boot::resolve_tokenizer_dir(settings, model.tokenizer_dir.as_deref(), &model_dir)?;
    boot::load_runtime(settings, &model_dir, &tok_dir)
}

fn predict(
    settings: &Settings,
    model: &ModelArgs,
    request: &std::path::Path,
    stats_json: Option<&std::path::Path>,
    runs: u32,
) -> anyhow::Result<ExitCode> {
    let body =
        std::fs::read(request).with_context(|| format!("cannot read `{}`", request.display()))?;
    let rt = runtime_for(settings, model)?;
    let mut answer = rt.predict_body(&body);
    for _ in 1..runs {
        if answer.is_err() {
            break;
        }
        answer = rt.predict_body(&body);
    }
    if let Some(path) = stats_json {
        let stats = serde_json::json!({ "device": rt.device_stats() });
        std::fs::write(path, serde_json::to_vec_pretty(&stats)?)
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    match answer {
        Ok(resp) => {
            println!("{}", serde_json::to_string(&resp)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("{}", e.body());
            Ok(ExitCode::from(if e.status().is_client_error() {
                2
            } else {
                1
            }))
        }
    }
}

fn make_demo(
    mut settings: Settings,
    model: &ModelArgs,
    request: &std::path::Path,
    out: &std::path::Path,
    backend: String,
) -> anyhow::Result<ExitCode> {
    let text = std::fs::read_to_string(request)
        .with_context(|| format!("cannot read `{}`", request.display()))?;
    let req: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("`{}`:{}:{}: {e}", request.display(), e.line(), e.column()))?;
    settings.dit_backend = backend;
    let rt = runtime_for(&settings, model)?;
    let demo = gr00t_server::demo::Demo::produce(&rt, req)?;
    demo.write(out)?;
    eprintln!(
        "wrote {} (request.json + expected.json, backend={}, weights {})",
        out.display(),
        rt.info.backend,
        rt.info
            .weights_fingerprint
            .as_deref()
            .map(|f| &f[..12])
            .unwrap_or("?")
    );
    Ok(ExitCode::SUCCESS)
}

fn plan(
    settings: &Settings,
    json: bool,
    model_dir: Option<&std::path::Path>,
    dtype: Option<&str>,
    ctx_tokens: usize,
) -> anyhow::Result<ExitCode> {
    use gr00t_runtime::config::ModelConfig;
    use tt_blackhole::format::ArenaDtype;
    let cfg = match model_dir {
        Some(d) => ModelConfig::from_dir(d)?,
        None => ModelConfig::full_size(),
    };
    let dtype = ArenaDtype::parse(dtype.unwrap_or(&settings.mk_arena_dtype))?;
    let dims = gr00t_megakernel::dit_dims(&cfg.gr00t, ctx_tokens);
    let plan = tt_blackhole::plan::build_plan(&dims, dtype)?;
    if json {
        println!("{}", plan.to_json());
    } else {
        let dit = tt_blackhole::plan::roofline::roofline(&plan);
        print!("{}", dit.report());
        // The whole forward, stage by stage, for one 252-pixel view (the GR1 camera after
        // `smart_resize`) and the prompt the DiT's cross blocks are cut for.
        let backbone = cfg.backbone_dims(ctx_tokens, 1, 252);
        let work = backbone.work(tt_blackhole::backbone::BACKBONE_DTYPE);
        print!(
            "{}",
            tt_blackhole::plan::stages::forward_roofline(&work, &dit).report()
        );
        // The device path's programs, packed by the code it runs with (`plan::program`).
        let grid = plan.grid;
        let steps = plan.step_needs().len();
        match plan.step_programs(grid) {
            Ok(p) => {
                // The most phase groups (and their cores) one of those programs runs.
                let groups = p.iter().map(|q| q.groups.len()).max().unwrap_or(0);
                let cores = p
                    .iter()
                    .map(|q| q.groups.iter().map(|g| g.1.len()).sum::<usize>())
                    .max()
                    .unwrap_or(0);
                println!(
                    "device programs per step: {} for its {steps} matmul steps on the {}x{} grid \
                     (their LayerNorms, attentions and ends in {groups} groups on {cores} cores)",
                    p.len(),
                    grid[0],
                    grid[1]
                )
            }
            Err(e) => println!("device programs per step: none fit ({e})"),
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn serve(
    settings: Settings,
    host: String,
    port: u16,
    model_dir: Option<PathBuf>,
    tok_dir: Option<PathBuf>,
    demo_dir: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let state = AppState::new();
    let app_state = state.clone();
    let result = rt.block_on(async move {
        let state = app_state;
        let listener = tokio::net::TcpListener::bind((host.as_str(), port))
            .await
            .with_context(|| format!("cannot listen on {host}:{port}"))?;
        let port = listener.local_addr()?.port();
        let (fail_tx, mut fail_rx) = tokio::sync::mpsc::channel::<String>(1);
        // Serve first (health answers 503 while loading), load in the background.
        let boot_state = state.clone();
        tokio::task::spawn_blocking(move || {
            match boot::boot(
                &settings,
                model_dir.as_deref(),
                tok_dir.as_deref(),
                demo_dir.as_deref(),
            ) {
                Ok((runtime, demo)) => {
                    let line = ready_line(&host, port, &runtime.info);
                    boot_state.set_ready(runtime, demo);
                    // A device backend's worker is watched from here on: a lost device is
                    // reopened without a restart (docs/blackhole.md §8).
                    if let Err(e) = gr00t_server::supervise::spawn(boot_state.clone()) {
                        tracing::error!("cannot start the device supervisor: {e}");
                    }
                    eprintln!("{line}");
                }
                Err(e) => {
                    let reason = format!("{e:#}").replace('\n', " ");
                    boot_state.set_failed(reason.clone());
                    let _ = fail_tx.blocking_send(reason);
                }
            }
        });
        let app = routes::router(state);
        let server = axum::serve(listener, app).with_graceful_shutdown(shutdown_signal());
        tokio::select! {
            r = server => { r?; Ok(ExitCode::SUCCESS) }
            Some(reason) = fail_rx.recv() => {
                eprintln!("gr00t-server: boot failed: {reason}");
                Ok(ExitCode::FAILURE)
            }
        }
    });
    // Bounded shutdown: no reopen starts any more, the device is closed (its worker gets a
    // short grace, then SIGKILL), and a forward still running (each device exchange has its
    // deadline) is not waited for past a few seconds.
    state.stop();
    if let Some(rt) = state.loaded_runtime() {
        rt.close_device();
    }
    rt.shutdown_timeout(SHUTDOWN_GRACE);
    result
}

/// How long the shutdown waits for blocking work (a forward in flight) after the server stops.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
