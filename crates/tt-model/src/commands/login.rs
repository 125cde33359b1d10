//! `tt-model login` / `logout` over the token store `huggingface_hub` uses (`$HF_HOME/token`,
//! kept by `tt_model_local::account`).
//!
//! The token comes from `--token` when given (the original's non-interactive form, which `tt`
//! uses), else from standard input when it is not a terminal, else from a prompt with echo off. It is checked with `whoami` before it is stored (mode 0600, temp file +
//! rename), and never printed.

use std::io::{BufRead, IsTerminal, Write};

use tt_model_local::Local;
use tt_model_local::account::LoggedOut;

use crate::ExitStatus;
use crate::args::{LoginArgs, LogoutArgs};
use crate::printer::Printer;

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
    let rt = crate::runtime()?;
    let who = rt.block_on(local.login(&raw))?;
    printer.done(
        &format!("Logged in as {}", who.name),
        Some(&format!("token stored in {}", who.path.display())),
    );
    if local.hf_token_in_env() {
        printer.warn("HF_TOKEN is set in this environment and wins over the stored token");
    }
    Ok(ExitStatus::Success)
}

/// Runs `tt-model logout`.
pub fn logout(_args: &LogoutArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    match local.logout()? {
        LoggedOut::Removed(path) => {
            printer.done("logged out", Some(&format!("removed {}", path.display())))
        }
        LoggedOut::NotLoggedIn(path) => {
            printer.skipped("not logged in", Some(&format!("no {}", path.display())))
        }
    }
    if local.hf_token_in_env() {
        printer.warn("HF_TOKEN is still set in this environment: unset it too");
    }
    Ok(ExitStatus::Success)
}
