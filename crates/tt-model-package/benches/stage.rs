//! Staging throughput: copy + hash `code/` (the hot path of a re-package) and the tree digest,
//! on a synthetic 64 MiB tree of 256 files. The 1 GB comparison against `sha256sum` lives in
//! `tests/throughput.rs` (ignored: it writes a gigabyte).

use std::path::PathBuf;

use tt_model_package::spec::{Kind, MetalSource, PackageSpec, RuntimeSpec, ServeDefault};
use tt_model_package::stage::stage_code;

fn main() {
    divan::main();
}

fn tree(total: usize, files: usize) -> (tempfile::TempDir, PackageSpec) {
    let dir = tempfile::tempdir().unwrap();
    let code = dir.path().join("models/demos/bench");
    std::fs::create_dir_all(&code).unwrap();
    std::fs::create_dir_all(dir.path().join("tt_metal")).unwrap();
    let per = total / files;
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..files {
        let data: Vec<u8> = (0..per)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        std::fs::write(code.join(format!("f{i:04}.bin.dat")), data).unwrap();
    }
    let spec = PackageSpec {
        manifest_path: PathBuf::from("tt-model.yaml"),
        name: "bench".into(),
        repo: "acme/bench".into(),
        weights: "acme/w".into(),
        weights_revision: None,
        kind: Kind::HttpServer,
        arch: "blackhole".into(),
        metal: MetalSource::Local {
            path: dir.path().to_path_buf(),
        },
        code: vec!["models/demos/bench".into()],
        extra_code: vec![],
        ubuntu: "22.04".into(),
        python: "3.12".into(),
        runtime: RuntimeSpec::empty(Kind::HttpServer),
        serve: ServeDefault::default(),
        profiles: vec![],
        verify: vec![],
        card: None,
    };
    (dir, spec)
}

#[divan::bench(sample_count = 10)]
fn stage_code_64mib(bencher: divan::Bencher) {
    let (dir, spec) = tree(64 << 20, 256);
    bencher
        .counter(divan::counter::BytesCount::new(64usize << 20))
        .bench_local(|| {
            let dest = tempfile::tempdir_in(dir.path()).unwrap();
            let stage = stage_code(&spec, dir.path(), &dest.path().join("code")).unwrap();
            divan::black_box(stage.digest);
        });
}
