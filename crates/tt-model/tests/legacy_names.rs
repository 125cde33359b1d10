//! The original's `tt-kernel` → `tt-model` rename shims, on the real binary: running it as
//! `tt-kernel` says the name is deprecated, and a `TT_KERNEL_*` variable stands in for its
//! unset `TT_MODEL_*` name (here `TT_KERNEL_HOME`, the state root).

use crate::common;

use std::process::Command;

use common::*;

#[test]
fn the_old_command_name_and_variables_still_work() {
    let tmp = TempDir::new("legacy-names");
    let t = tmp.0.clone();
    let legacy = t.join("tt-kernel");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_tt-model"), &legacy).unwrap();
    let out = Command::new(&legacy).arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stderr(&out).contains("`tt-kernel` is the old name of this tool"),
        "{}",
        stderr(&out)
    );
    let plain = Command::new(env!("CARGO_BIN_EXE_tt-model"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(!stderr(&plain).contains("old name"), "{}", stderr(&plain));

    // The state root from TT_KERNEL_HOME: its installed.json is the one `list` reads.
    let home = t.join("kernel-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("installed.json"), "[]").unwrap();
    let list = |extra: &[(&str, &std::path::Path)]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_tt-model"));
        c.args(["list", "--json"])
            .env("NO_COLOR", "1")
            .env_remove("TT_MODEL_HOME")
            .env("XDG_CACHE_HOME", t.join("xdg"))
            .env("DOCKER_HOST", "unix:///nonexistent.sock");
        for (k, v) in extra {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = list(&[("TT_KERNEL_HOME", &home)]);
    let corrupt = format!("{} is corrupt", home.join("installed.json").display());
    assert!(stderr(&out).contains(&corrupt), "{}", stderr(&out));
    let out = list(&[("TT_KERNEL_HOME", &home), ("TT_MODEL_HOME", &t.join("new"))]);
    assert!(
        !stderr(&out).contains(&corrupt),
        "TT_MODEL_HOME wins: {}",
        stderr(&out)
    );
}
