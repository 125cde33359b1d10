//! `tt-model logs [-f]`: the library's `logs` use case opens the log of a package's
//! container (running, else the most recent exited one); here its lines go to the terminal
//! until the end or Ctrl-C.

use tt_model_engine::logs::LogStream;

use crate::ExitStatus;
use crate::args::LogsArgs;
use crate::printer::Printer;
use tt_model_local::Local;
use tt_model_local::logs::{self, LogsRequest};

/// Runs `tt-model logs`.
pub fn run(args: &LogsArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    crate::block_on(show(args, printer, local))
}

async fn show(args: &LogsArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let req = LogsRequest {
        target: &args.target,
        profile: args.profile.as_deref(),
        follow: args.follow,
        tail: args.tail,
    };
    let logs::ContainerLog {
        container: c,
        lines: mut s,
    } = logs::open(local, &req).await?;
    if !c.running {
        printer.note(&format!(
            "{} is not running ({}, exit code {}); showing its last log",
            c.name,
            c.status,
            c.exit_code.unwrap_or(-1)
        ));
    }
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => return Ok(ExitStatus::Interrupted),
            line = s.next() => match line {
                Some(l) => {
                    let l = l?;
                    match l.stream {
                        LogStream::Stdout => printer.out_raw(&format!("{}\n", l.text)),
                        LogStream::Stderr => printer.err_raw(&format!("{}\n", l.text)),
                    }
                }
                None => break,
            }
        }
    }
    Ok(ExitStatus::Success)
}
