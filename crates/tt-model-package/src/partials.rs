//! Staging folders in `--out`: `.NAME.partial-<pid>-XXXXXX`, named for the process that owns
//! them, so a later run can tell a killed run's leftovers (owner gone) from a concurrent
//! run's work in progress (owner alive) and sweep only the former.

use std::fs;
use std::path::{Path, PathBuf};

/// The part of a staging folder's name before the owner's pid.
const MARK: &str = ".partial-";

/// The name prefix of this process's staging folder for package `name`.
pub fn partial_prefix(name: &str) -> String {
    format!(".{name}{MARK}{}-", std::process::id())
}

/// The owner pid a staging folder's name records, if it is one of ours.
pub fn owner_pid(file_name: &str) -> Option<u32> {
    if !file_name.starts_with('.') {
        return None;
    }
    let (_, rest) = file_name.rsplit_once(MARK)?;
    let (pid, _) = rest.split_once('-')?;
    pid.parse().ok()
}

/// Whether process `pid` still exists. A zombie or a reused pid counts as alive: the cost of
/// that mistake is a folder left for the next run, never a folder taken from a live one.
pub fn pid_alive(pid: u32) -> bool {
    pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists()
}

/// Removes the staging folders in `out_root` whose owner process is gone; returns them.
/// Folders without a pid in their name (or that cannot be read) are left alone.
pub fn sweep_stale(out_root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(out_root) else {
        return Vec::new();
    };
    let mut swept = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_pid) else {
            continue;
        };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && !pid_alive(pid) && fs::remove_dir_all(entry.path()).is_ok() {
            swept.push(entry.path());
        }
    }
    swept.sort();
    swept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_pid_is_read_from_our_names_only() {
        assert_eq!(owner_pid(".demo.partial-1234-aB3xYz"), Some(1234));
        assert_eq!(owner_pid(".my.model.partial-77-zzzzzz"), Some(77));
        assert!(partial_prefix("demo").starts_with(".demo.partial-"));
        let own = format!("{}abcdef", partial_prefix("demo"));
        assert_eq!(owner_pid(&own), Some(std::process::id()));
        for other in [
            "demo",
            ".demo.old-12",
            ".demo.partial-aB3xYz",
            "x.partial-1-a",
        ] {
            assert_eq!(owner_pid(other), None, "{other}");
        }
    }

    /// A pid that is certainly dead: a child that has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    fn stale_partials_are_swept_and_live_ones_kept() {
        let out = tempfile::tempdir().unwrap();
        let dead = out
            .path()
            .join(format!(".demo.partial-{}-aaaaaa", dead_pid()));
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let live = out
            .path()
            .join(format!(".demo.partial-{}-bbbbbb", sleeper.id()));
        let mine = out
            .path()
            .join(format!("{}cccccc", partial_prefix("other")));
        let legacy = out.path().join(".demo.partial-dddddd");
        let output = out.path().join("demo");
        for d in [&dead, &live, &mine, &legacy, &output] {
            fs::create_dir_all(d.join("code")).unwrap();
            fs::write(d.join("code/f"), "x").unwrap();
        }

        let swept = sweep_stale(out.path());
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();

        assert_eq!(swept, vec![dead.clone()]);
        assert!(!dead.exists(), "a dead owner's partial is removed");
        assert!(
            live.join("code/f").is_file(),
            "a live owner's partial stays"
        );
        assert!(mine.join("code/f").is_file(), "our own partial stays");
        assert!(legacy.is_dir(), "a name without a pid is not ours to judge");
        assert!(output.join("code/f").is_file(), "the output is untouched");
    }
}
