//! Staging + digest throughput on a 1 GB synthetic tree, against `sha256sum` of the same
//! files. Ignored by default (it writes 2 GB of temporary files); run with
//! `cargo test -p tt-model-package --test integration -- --ignored --nocapture throughput::`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use tt_model_package::spec::{Kind, MetalSource, PackageSpec, RuntimeSpec, ServeDefault};
use tt_model_package::stage::stage_code;

#[test]
#[ignore = "writes 2 GB of temporary files; a benchmark, run it by hand"]
fn stage_and_digest_1gb_vs_sha256sum() {
    const TOTAL: usize = 1 << 30;
    const FILES: usize = 512;
    let dir = tempfile::tempdir_in(std::env::temp_dir()).unwrap();
    let code = dir.path().join("models/big");
    std::fs::create_dir_all(&code).unwrap();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut paths = Vec::new();
    for i in 0..FILES {
        let data: Vec<u8> = (0..TOTAL / FILES / 8)
            .flat_map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state.to_le_bytes()
            })
            .collect();
        let p = code.join(format!("shard-{i:04}.dat"));
        std::fs::write(&p, data).unwrap();
        paths.push(p);
    }
    let spec = PackageSpec {
        manifest_path: PathBuf::from("tt-model.yaml"),
        name: "big".into(),
        repo: "acme/big".into(),
        weights: "acme/w".into(),
        weights_revision: None,
        kind: Kind::HttpServer,
        arch: "blackhole".into(),
        metal: MetalSource::Local {
            path: dir.path().to_path_buf(),
        },
        code: vec!["models/big".into()],
        extra_code: vec![],
        ubuntu: "22.04".into(),
        python: "3.12".into(),
        runtime: RuntimeSpec::empty(Kind::HttpServer),
        serve: ServeDefault::default(),
        profiles: vec![],
        verify: vec![],
        card: None,
    };
    // Warm the page cache for both contenders.
    let _ = Command::new("cat")
        .args(&paths)
        .stdout(std::process::Stdio::null())
        .status();

    let t = Instant::now();
    let stage = stage_code(&spec, dir.path(), &dir.path().join("out/code")).unwrap();
    let ours = t.elapsed().as_secs_f64();
    assert_eq!(stage.bytes as usize, TOTAL);

    let t = Instant::now();
    let status = Command::new("sha256sum")
        .args(&paths)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    let theirs = t.elapsed().as_secs_f64();
    assert!(status.success());

    let gb = TOTAL as f64 / 1e9;
    println!(
        "stage (copy + hash) {:.2}s = {:.2} GB/s; sha256sum (hash only) {:.2}s = {:.2} GB/s; ratio ours/sha256sum = {:.2}",
        ours,
        gb / ours,
        theirs,
        gb / theirs,
        ours / theirs
    );
}
