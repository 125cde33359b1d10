//! `tt-model login` / `logout`: the token store `huggingface_hub` uses (`$HF_HOME/token`).
//!
//! The token comes from `--token` when given (the original's non-interactive form, which `tt`
//! uses), else from standard input when it is not a terminal, else from a prompt with echo off. It is checked with `whoami` before it is stored (mode 0600, temp file +
//! rename), and never printed.

use std::io::{BufRead, IsTerminal, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use tt_model_local::Local;

use tt_model_hub::env::HubEnv;
use tt_model_hub::hub::HubClient;

use super::hub;
use crate::args::{LoginArgs, LogoutArgs};
use crate::printer::Printer;
use crate::{ExitStatus, UserError};

/// Reads one line from the terminal with echo off (restored afterwards, even on error).
fn read_hidden(prompt: &str) -> std::io::Result<String> {
    let mut err = std::io::stderr();
    write!(err, "{prompt}")?;
    err.flush()?;
    let fd = libc::STDIN_FILENO;
    // SAFETY: `termios` is plain data; tcgetattr fills it for a valid fd and we check its result.
    let mut old: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: fd 0 is open (a terminal, checked by the caller); `old` is a valid out pointer.
    let have_tty = unsafe { libc::tcgetattr(fd, &mut old) } == 0;
    if have_tty {
        let mut quiet = old;
        quiet.c_lflag &= !libc::ECHO;
        quiet.c_lflag |= libc::ECHONL;
        // SAFETY: `quiet` is a termios copied from the terminal's own settings.
        unsafe { libc::tcsetattr(fd, libc::TCSANOW, &quiet) };
    }
    let mut line = String::new();
    let read = std::io::stdin().lock().read_line(&mut line);
    if have_tty {
        // SAFETY: restores the settings read above on the same fd.
        unsafe { libc::tcsetattr(fd, libc::TCSANOW, &old) };
    }
    read?;
    Ok(line)
}

/// Writes `token` to `path` with mode 0600 through a temp file and a rename.
fn store(path: &Path, token: &str) -> anyhow::Result<()> {
    let dir = path.parent().expect("the token file has a parent");
    std::fs::create_dir_all(dir)
        .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
    let tmp = dir.join(format!(".token.{}.tmp", std::process::id()));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(token.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("cannot write {}: {e}", path.display())
    })
}

/// Runs `tt-model login`.
pub fn login(args: &LoginArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let stdin = std::io::stdin();
    let raw = if let Some(t) = &args.token {
        t.clone()
    } else if stdin.is_terminal() {
        read_hidden("Hugging Face token (input hidden): ")?
    } else {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        line
    };
    let token = raw.trim().to_string();
    if token.is_empty() {
        return Err(UserError(
            "no token given: paste a token from https://huggingface.co/settings/tokens, or pipe it in (tt-model login < token.txt)".into(),
        )
        .into());
    }
    let env = HubEnv {
        token: Some(token.clone()),
        ..local.hub().clone()
    };
    let path = env.hf_home.join("token");
    let client = HubClient::new(env);
    let rt = crate::runtime()?;
    let who = rt
        .block_on(client.whoami())
        .map_err(hub::consequence("the token was not stored"))?;
    store(&path, &token)?;
    printer.done(
        &format!("Logged in as {}", who.name),
        Some(&format!("token stored in {}", path.display())),
    );
    if local.hf_token_in_env() {
        printer.warn("HF_TOKEN is set in this environment and wins over the stored token");
    }
    Ok(ExitStatus::Success)
}

/// Runs `tt-model logout`.
pub fn logout(_args: &LogoutArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let path = local.hub().hf_home.join("token");
    match std::fs::remove_file(&path) {
        Ok(()) => printer.done("logged out", Some(&format!("removed {}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            printer.skipped("not logged in", Some(&format!("no {}", path.display())))
        }
        Err(e) => return Err(anyhow::anyhow!("cannot remove {}: {e}", path.display())),
    }
    if local.hf_token_in_env() {
        printer.warn("HF_TOKEN is still set in this environment: unset it too");
    }
    Ok(ExitStatus::Success)
}
