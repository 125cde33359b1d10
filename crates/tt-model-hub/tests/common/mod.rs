//! Helpers shared by the download tests: a `HubEnv` pointing at the local server and a
//! byte-counting [`tt_model_events::Transfer`].

#![allow(dead_code)] // each test binary uses its own subset

use std::sync::atomic::{AtomicU64, Ordering};

use tt_model_hub::Transfer;
use tt_model_hub::env::HubEnv;
use tt_model_testkit::hub::HubServer;

/// Endpoint = the test server, cache under `dir`, a token so its forwarding can be checked.
pub fn env(server: &HubServer, dir: &std::path::Path) -> HubEnv {
    HubEnv {
        endpoint: server.endpoint(),
        hf_home: dir.join("home"),
        hub_cache: dir.join("hub"),
        token: Some("hf_test".into()),
    }
}

/// Counts the bytes the downloader reports.
#[derive(Default)]
pub struct Count(pub AtomicU64);

impl Count {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Transfer for Count {
    fn bytes(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
}
