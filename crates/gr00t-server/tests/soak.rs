//! 200 concurrent `/predict` requests over real TCP on 127.0.0.1: all succeed, the answers are
//! the golden actions, and resident memory does not keep growing between rounds.

use crate::common;

use common::*;
use gr00t_server::routes::router;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn post(addr: std::net::SocketAddr, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let mut resp = vec![];
    s.read_to_end(&mut resp).await.unwrap();
    let text = String::from_utf8_lossy(&resp);
    let code: u16 = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let split = resp.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    (code, resp[split + 4..].to_vec())
}

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The soak measures its own process's RSS: the crate's one integration binary runs other
/// tests on other threads (checkpoints made, models loaded), so it runs itself again alone.
const ALONE: &str = "GR00T_SOAK_ALONE";

#[test]
fn two_hundred_concurrent_requests_soak() {
    if std::env::var_os(ALONE).is_some() {
        return soak();
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "soak::two_hundred_concurrent_requests_soak",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env(ALONE, "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "the soak alone: {stdout}\n{stderr}");
    assert!(
        stdout.contains("1 passed"),
        "the soak did not run alone: {stdout}"
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn soak() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(ready_state());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let body = std::sync::Arc::new(serde_json::to_vec(&case1_request()).unwrap());
    let mut rss = vec![];
    for round in 0..3 {
        let tasks: Vec<_> = (0..200)
            .map(|_| {
                let body = body.clone();
                tokio::spawn(async move { post(addr, &body).await })
            })
            .collect();
        for t in tasks {
            let (code, resp) = t.await.unwrap();
            assert_eq!(
                code,
                200,
                "round {round}: {}",
                String::from_utf8_lossy(&resp)
            );
            let v: serde_json::Value = serde_json::from_slice(&resp).unwrap();
            assert!(max_action_err(&v["actions"]) <= 1e-5);
        }
        rss.push(rss_kib());
    }
    // Round 1 warms allocator pools; after that memory must be flat (< 32 MiB of growth).
    let growth = rss[2].saturating_sub(rss[1]);
    assert!(
        growth < 32 * 1024,
        "RSS grew by {growth} KiB between rounds: {rss:?}"
    );
}
