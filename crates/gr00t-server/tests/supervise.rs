//! The server's supervision of a device, without a device: the golden-replay policy on a
//! stand-in device whose loss the test controls (a real device needs the simulator:
//! `device_sim.rs` runs the same sequence with a real worker SIGSTOPped and SIGKILLed). The
//! requests go through the real axum router and the real supervisor thread.

use crate::common;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use common::*;
use gr00t_megakernel::counters::{DeviceCounters, DeviceStats};
use gr00t_runtime::policy::{
    ActionChunk, DeviceStatus, DeviceSupervision, ForwardTiming, ModelInputs, Policy, PolicyError,
};
use gr00t_server::routes::router;
use gr00t_server::state::AppState;
use http_body_util::BodyExt;
use serde_json::Value;
use tower::ServiceExt;

/// A device that is lost when the test says so and comes back after `failures` failed reopens.
#[derive(Default)]
struct StandInDevice {
    lost: Mutex<Option<String>>,
    failures: AtomicU32,
    reopened: AtomicU32,
    /// The real counting layer, driven by [`OnDevice::predict`] as the device backend drives it.
    counters: DeviceCounters,
}

impl DeviceSupervision for StandInDevice {
    fn status(&self) -> DeviceStatus {
        let lost = self.lost.lock().unwrap().clone();
        DeviceStatus {
            device: "stand-in".into(),
            usable: lost.is_none(),
            lost,
            worker_pid: None,
            reopened: self.reopened.load(Ordering::SeqCst),
        }
    }
    fn reopen(&self) -> Result<(), PolicyError> {
        if self.failures.load(Ordering::SeqCst) > 0 {
            self.failures.fetch_sub(1, Ordering::SeqCst);
            return Err(PolicyError::DeviceUnavailable {
                device: "stand-in".into(),
                reason: "reopening failed: no device yet".into(),
            });
        }
        *self.lost.lock().unwrap() = None;
        self.reopened.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn close(&self) {}
    fn stats(&self) -> Option<DeviceStats> {
        self.counters.stats()
    }
}

/// What the stand-in's forward moves: 4 steps of 3 programs, each sending 100 bytes and
/// reading one fp32 tile back.
const STAND_IN_STEPS: usize = 4;
const STAND_IN_PROGRAMS: usize = 3;

struct OnDevice {
    replay: GoldenReplayPolicy,
    device: std::sync::Arc<StandInDevice>,
}

impl Policy for OnDevice {
    fn backend_name(&self) -> &str {
        "golden-replay-on-device"
    }
    fn dims(&self) -> (usize, usize, usize) {
        self.replay.dims()
    }
    fn predict(&self, inputs: &ModelInputs) -> Result<(ActionChunk, ForwardTiming), PolicyError> {
        if let Some(reason) = self.device.lost.lock().unwrap().clone() {
            return Err(PolicyError::DeviceUnavailable {
                device: "stand-in".into(),
                reason,
            });
        }
        let c = &self.device.counters;
        c.begin_forward();
        for _ in 0..STAND_IN_STEPS {
            let before = c.total();
            for _ in 0..STAND_IN_PROGRAMS {
                c.record_exchange(true, 100, 4096);
            }
            c.record_step(before.until(c.total()));
        }
        c.end_forward(true);
        self.replay.predict(inputs)
    }
    fn device(&self) -> Option<&dyn DeviceSupervision> {
        Some(self.device.as_ref())
    }
}

async fn call(
    state: &AppState,
    method: &str,
    path: &str,
    body: Vec<u8>,
) -> (StatusCode, bool, Value) {
    let req = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::from(body))
        .unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let (status, retry) = (resp.status(), resp.headers().contains_key("retry-after"));
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, retry, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn a_lost_device_answers_503_and_the_server_recovers_it() {
    let device = std::sync::Arc::new(StandInDevice::default());
    let policy = OnDevice {
        replay: GoldenReplayPolicy::new(),
        device: device.clone(),
    };
    let rt = gr00t_server::boot::build_runtime(&settings(), &case1(), &tok_dir(), Box::new(policy))
        .unwrap();
    let state = AppState::new();
    state.set_ready(std::sync::Arc::new(rt), None);
    let body = case1_body(false);

    let (s, _, v) = call(&state, "GET", "/health", vec![]).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["device"]["usable"], true, "{v}");

    // Lost: /health says so at once (before any supervisor), and /predict is a 503 to retry.
    *device.lost.lock().unwrap() = Some("the ttnn worker exited (signal: 9)".into());
    device.failures.store(1, Ordering::SeqCst);
    let (s, retry, v) = call(&state, "GET", "/health", vec![]).await;
    assert_eq!((s, retry), (StatusCode::SERVICE_UNAVAILABLE, true), "{v}");
    assert_eq!(v["status"], "recovering");
    assert!(v["error"].as_str().unwrap().contains("signal: 9"), "{v}");
    let (s, retry, v) = call(&state, "POST", "/predict", body.clone()).await;
    assert_eq!((s, retry), (StatusCode::SERVICE_UNAVAILABLE, true), "{v}");
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .contains("device stand-in unavailable"),
        "{v}"
    );

    // The supervisor reopens it (one failed try, then the backoff, then success).
    gr00t_server::supervise::spawn(state.clone()).unwrap();
    let end = Instant::now() + Duration::from_secs(60);
    let mut saw_retry_failure = false;
    loop {
        let (s, _, v) = call(&state, "GET", "/health", vec![]).await;
        if s == StatusCode::OK {
            break;
        }
        saw_retry_failure |= v["error"]
            .as_str()
            .unwrap_or("")
            .contains("reopening failed");
        assert!(Instant::now() < end, "never recovered: {v}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(saw_retry_failure, "the failed reopen was not reported");
    assert_eq!(device.reopened.load(Ordering::SeqCst), 1);
    let (s, _, v) = call(&state, "POST", "/predict", body).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(max_action_err(&v["actions"]) <= 1e-5);
    state.stop();
}

/// `/info` shows the served device's measured traffic: a note before the first forward, the
/// last forward's counts after it.
#[tokio::test]
async fn info_shows_the_device_counts_after_a_forward() {
    let device = std::sync::Arc::new(StandInDevice::default());
    let policy = OnDevice {
        replay: GoldenReplayPolicy::new(),
        device: device.clone(),
    };
    let rt = gr00t_server::boot::build_runtime(&settings(), &case1(), &tok_dir(), Box::new(policy))
        .unwrap();
    let state = AppState::new();
    state.set_ready(std::sync::Arc::new(rt), None);
    let (s, _, v) = call(&state, "GET", "/info", vec![]).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["device"]["forwards"], 0, "{v}");
    assert!(
        v["device"]["note"].as_str().unwrap().contains("no forward"),
        "{v}"
    );
    let (s, _, v) = call(&state, "POST", "/predict", case1_body(false)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, _, v) = call(&state, "GET", "/info", vec![]).await;
    let d = &v["device"];
    assert_eq!(d["steps"], STAND_IN_STEPS, "{v}");
    assert_eq!(d["programs_per_step"], STAND_IN_PROGRAMS, "{v}");
    assert_eq!(
        d["host_to_device_bytes_per_step"],
        STAND_IN_PROGRAMS * 100,
        "{v}"
    );
    assert_eq!(
        d["device_to_host_bytes_per_step"],
        STAND_IN_PROGRAMS * 4096,
        "{v}"
    );
    assert_eq!(d["cumulative"]["forwards"], 1, "{v}");
    // The stand-in says the host ran none of the model's stages (its forward is the device's):
    // only the pipeline's own around it are listed.
    assert_eq!(
        d["host_stages"],
        serde_json::json!(["preprocess", "tokenize", "decode"]),
        "{v}"
    );
}
