//! Shared server state: health, the runtime once loaded, the shipped demo.
//!
//! ```text
//!   Starting ──load + warm-up ok──► Ready ◄──device reopened── Recovering(reason)
//!       │                             └────device lost──────────────►┘
//!       └──────── failure ────────► Failed(reason)   (the binary then exits non-zero)
//! ```
//! `Recovering` is the supervisor's ([`crate::supervise`]): the device's worker died or was
//! killed after a missed deadline, and it is being reopened.
//! One lock guards health, runtime and demo together so a snapshot is consistent.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use crate::boot::Demo;
use crate::runtime::Runtime;

/// Largest accepted request body. A 4096×4096 PNG (the largest frame the decoder accepts) is
/// at most ~50 MB raw, but camera frames are JPEG/PNG of a few hundred KB; 32 MiB leaves room
/// for base64 (+33 %) of any realistic frame plus a `[1, 50, 128]` noise array (~150 KB).
pub const MAX_BODY_BYTES: usize = 32 << 20;
/// Requests allowed to wait for the device at once; more get 503 instead of an unbounded queue.
pub const MAX_IN_FLIGHT: usize = 1024;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Health {
    Starting,
    Ready,
    /// The device was lost; the supervisor is reopening it (why, with the worker's last lines).
    Recovering(String),
    Failed(String),
}

impl Health {
    pub(crate) fn as_str(&self) -> &'static str {
        match self {
            Health::Starting => "starting",
            Health::Ready => "ready",
            Health::Recovering(_) => "recovering",
            Health::Failed(_) => "failed",
        }
    }
}

#[derive(Default)]
struct Inner {
    health: Option<Health>,
    runtime: Option<Arc<Runtime>>,
    demo: Option<Arc<Demo>>,
}

/// Cloneable handle given to every handler.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<RwLock<Inner>>,
    in_flight: Arc<AtomicUsize>,
    stopping: Arc<AtomicBool>,
    pub(crate) body_limit: usize,
}

impl Default for AppState {
    fn default() -> Self {
        Self::new()
    }
}

impl AppState {
    /// A state that is `Starting`, with no runtime or demo yet.
    pub fn new() -> Self {
        Self {
            inner: Arc::new(RwLock::new(Inner {
                health: Some(Health::Starting),
                ..Default::default()
            })),
            in_flight: Arc::new(AtomicUsize::new(0)),
            stopping: Arc::new(AtomicBool::new(false)),
            body_limit: MAX_BODY_BYTES,
        }
    }

    pub(crate) fn health(&self) -> Health {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .health
            .clone()
            .unwrap_or(Health::Starting)
    }

    /// The runtime, if ready.
    pub fn runtime(&self) -> Option<Arc<Runtime>> {
        let g = self.inner.read().unwrap_or_else(|p| p.into_inner());
        match g.health {
            Some(Health::Ready) => g.runtime.clone(),
            _ => None,
        }
    }

    /// The runtime once loaded, whatever the health (the supervisor's view).
    pub fn loaded_runtime(&self) -> Option<Arc<Runtime>> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .runtime
            .clone()
    }

    pub(crate) fn demo(&self) -> Option<Arc<Demo>> {
        self.inner
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .demo
            .clone()
    }

    /// Starting -> Ready.
    pub fn set_ready(&self, runtime: Arc<Runtime>, demo: Option<Arc<Demo>>) {
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        g.runtime = Some(runtime);
        g.demo = demo;
        g.health = Some(Health::Ready);
    }

    /// Starting -> Failed.
    pub fn set_failed(&self, reason: String) {
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        g.health = Some(Health::Failed(reason));
    }

    /// Ready or Recovering -> Recovering(reason): the device was lost.
    pub fn set_recovering(&self, reason: String) {
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        if matches!(g.health, Some(Health::Ready | Health::Recovering(_))) {
            g.health = Some(Health::Recovering(reason));
        }
    }

    /// Recovering -> Ready: the device was reopened.
    pub fn set_recovered(&self) {
        let mut g = self.inner.write().unwrap_or_else(|p| p.into_inner());
        if matches!(g.health, Some(Health::Recovering(_))) {
            g.health = Some(Health::Ready);
        }
    }

    /// The server is shutting down: the supervisor stops reopening.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Whether [`AppState::stop`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Reserve a slot in the device queue; `None` when full.
    pub fn enter(&self) -> Option<InFlight> {
        let n = self.in_flight.fetch_add(1, Ordering::SeqCst);
        if n >= MAX_IN_FLIGHT {
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(InFlight(self.in_flight.clone()))
    }
}

/// A reserved queue slot, released on drop.
pub struct InFlight(Arc<AtomicUsize>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}
