//! `package` of an http-server whose `runtime.cargo` workspace does not compile: exit 1, the
//! compiler's first error in the diagnosis card, nothing written (real engine for the base
//! image pin that precedes the build).

use crate::common;

use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_rust_binary_that_does_not_compile_stops_the_package_with_the_first_error() {
    if engine().await.is_none() {
        return;
    }
    make_base_images();
    let tmp = TempDir::new("package-cargo");
    let t = tmp.0.clone();
    let ws = t.join("ws");
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(
        ws.join("Cargo.toml"),
        "[package]\nname = \"broken-srv\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("src/main.rs"),
        "fn main() {\n    let port: u16 = \"8000\";\n}\n",
    )
    .unwrap();
    let lock =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["generate-lockfile", "--offline"])
            .current_dir(&ws)
            .output()
            .unwrap();
    assert!(lock.status.success());
    let yaml = example_yaml(&t, "cargo-broken");
    let text = std::fs::read_to_string(&yaml).unwrap().replace(
        "runtime:\n",
        &format!(
            "runtime:\n  cargo: {{workspace: {}, package: broken-srv}}\n",
            ws.display()
        ),
    );
    std::fs::write(&yaml, text).unwrap();
    let out = t.join("out");
    let pkg = package(&t, &[], &yaml, &out);
    let err = stderr(&pkg);
    assert_eq!(pkg.status.code(), Some(1), "{err}");
    assert!(
        err.contains("`runtime.cargo`: the Rust package `broken-srv` did not compile"),
        "{err}"
    );
    assert!(err.contains("| error[E0308]: mismatched types"), "{err}");
    assert!(err.contains("src/main.rs:2:"), "{err}");
    assert!(!out.join("cargo-broken").exists(), "nothing was written");
}
