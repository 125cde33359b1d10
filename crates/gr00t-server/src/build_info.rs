//! What this server binary is, for `/info`: its version, the sha256 of its own executable, and
//! the provenance `tt-model package` shipped beside it in the image (`TT_MODEL_CARGO_BUILD`,
//! the same facts as the wire manifest's `built.cargo`). A client can check that the binary
//! answering is the one the package recorded.

use std::io::Read;
use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};

/// The variable naming the provenance file `tt-model package` writes into the image.
pub const CARGO_BUILD_ENV: &str = "TT_MODEL_CARGO_BUILD";

/// `/info`'s `build` block.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BuildInfo {
    /// This crate's version.
    pub server_version: String,
    /// sha256 of the running executable (`None`: unreadable).
    pub binary_sha256: Option<String>,
    /// The image's `built.cargo` record (`None`: not run from a packaged image).
    pub image: Option<serde_json::Value>,
}

impl BuildInfo {
    /// Reads the running executable and the provenance file named by [`CARGO_BUILD_ENV`].
    pub fn current() -> Self {
        let binary_sha256 = std::env::current_exe()
            .ok()
            .and_then(|p| sha256_file(&p).ok());
        let image = std::env::var_os(CARGO_BUILD_ENV)
            .and_then(|p| std::fs::read(p).ok())
            .and_then(|b| serde_json::from_slice(&b).ok());
        Self {
            server_version: env!("CARGO_PKG_VERSION").to_string(),
            binary_sha256,
            image,
        }
    }
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:x}", h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_binary_is_hashed() {
        let info = BuildInfo::current();
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(
            info.binary_sha256.as_deref(),
            Some(format!("{:x}", Sha256::digest(&me)).as_str())
        );
        assert_eq!(info.server_version, env!("CARGO_PKG_VERSION"));
    }
}
