//! A real OCI registry for the tests: Debian's `docker-registry` (the CNCF distribution
//! server), started on a free loopback port with its own storage and Basic auth from
//! `tests/fixtures/registry/htpasswd`, stopped on drop. `scripts/setup.sh` installs it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, repo_root};

/// The fixture's user and password (a bcrypt hash of it is in the htpasswd file).
pub const USER: &str = "tt";
pub const PASSWORD: &str = "tt-registry-secret";

pub struct LocalRegistry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub host: String,
    /// The storage root (`docker/registry/v2/…` under it).
    pub storage: PathBuf,
}

impl LocalRegistry {
    /// Starts one under `dir`; `None` (after saying why) when the binary is missing and the
    /// run does not require it (`TT_MODEL_REQUIRE_DOCKER=1` makes that a failure).
    pub fn start(dir: &Path) -> Option<Self> {
        Self::start_with(dir, true)
    }

    /// [`LocalRegistry::start`], with Basic auth or anonymous.
    pub fn start_with(dir: &Path, auth: bool) -> Option<Self> {
        let bin = ["/usr/bin/docker-registry", "/usr/local/bin/docker-registry"]
            .into_iter()
            .map(PathBuf::from)
            .find(|p| p.is_file());
        let Some(bin) = bin else {
            assert!(
                std::env::var("TT_MODEL_REQUIRE_DOCKER").as_deref() != Ok("1"),
                "docker-registry is not installed (scripts/setup.sh installs it)"
            );
            eprintln!("skipped: docker-registry is not installed (scripts/setup.sh installs it)");
            return None;
        };
        let port = free_port();
        let host = format!("127.0.0.1:{port}");
        let storage = dir.join("registry-storage");
        std::fs::create_dir_all(&storage).unwrap();
        let htpasswd = repo_root().join("tests/fixtures/registry/htpasswd");
        let config = dir.join("registry.yml");
        let auth = if auth {
            format!(
                "auth:\n  htpasswd:\n    realm: tt-model-test\n    path: {}\n",
                htpasswd.display()
            )
        } else {
            String::new()
        };
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: {}}}\n  delete: {{enabled: true}}\nhttp:\n  addr: {host}\n{auth}",
                storage.display(),
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("registry.log")).unwrap();
        let child = Command::new(bin)
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let reg = LocalRegistry {
            child,
            host,
            storage,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&reg.host).is_err() {
            assert!(Instant::now() < deadline, "the registry did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(reg)
    }

    /// A Docker config directory holding this registry's credentials (`DOCKER_CONFIG`).
    pub fn docker_config(&self, dir: &Path) -> PathBuf {
        use base64::Engine as _;
        let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"));
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            serde_json::json!({"auths": {self.host.clone(): {"auth": auth}}}).to_string(),
        )
        .unwrap();
        dir.to_path_buf()
    }

    /// The stored blob `digest`'s data file.
    pub fn blob_path(&self, digest: &str) -> PathBuf {
        let hex = digest.trim_start_matches("sha256:");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// Whether `repository` has a manifest revision `digest`.
    pub fn has_manifest(&self, repository: &str, digest: &str) -> bool {
        self.storage
            .join("docker/registry/v2/repositories")
            .join(repository)
            .join("_manifests/revisions/sha256")
            .join(digest.trim_start_matches("sha256:"))
            .join("link")
            .is_file()
    }
}

impl Drop for LocalRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
