//! `gr00t-server`: the HTTP front of the GR00T N1.6 runtime, and of N1.7 when the checkpoint
//! is one ([`boot::load_runtime`], [`n17_runtime`]).
//!
//! ```text
//!  routes (axum only) ──► runtime::Runtime ──► gr00t_runtime::request::HostPipeline (host work)
//!        │                      └──────────► dyn Policy (the model; one FIFO device lock)
//!        └── state::AppState (health, runtime, demo)      boot: settings ► dirs ► load ► warm-up ► Ready
//!                  ▲ supervise: a lost device ► Recovering ► reopened ► Ready
//! ```
// A library reports through its return values and its callers' printers, never the terminal.
#![warn(missing_docs)]

pub mod api;
pub mod boot;
pub mod build_info;
pub mod checkpoint;
pub mod checkpoint_n17;
pub mod demo;
pub mod error;
pub mod fifo;
pub mod model_dir;
pub mod n17_api;
pub mod n17_runtime;
pub mod request_scan;
pub mod routes;
pub mod runtime;
pub mod settings;
pub mod state;
pub mod supervise;

/// The line printed once the server accepts predictions (the package manifest's `ready_line`
/// matches its prefix `gr00t-server ready on http://`).
pub fn ready_line(host: &str, port: u16, info: &runtime::RuntimeInfo) -> String {
    format!(
        "gr00t-server ready on http://{host}:{port} (backend={}, embodiment={}, stage={}, warmup_pcc={})",
        info.backend,
        info.embodiment,
        info.stage,
        info.warmup_pcc
            .map(|p| format!("{p:.6}"))
            .unwrap_or_else(|| "unchecked".into())
    )
}
