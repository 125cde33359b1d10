//! `tt-model logs [-f]`: the log of a package's container, running or exited (a crashed boot
//! is exactly when the log matters).

use tt_model_engine::logs::{self, LogStream};

use super::serve::{host, target};
use super::stop::running_of;
use crate::args::LogsArgs;
use crate::printer::Printer;
use crate::{ExitStatus, UserError};

/// Runs `tt-model logs`.
pub fn run(args: &LogsArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(show(args, printer))
}

async fn show(args: &LogsArgs, printer: &Printer) -> anyhow::Result<ExitStatus> {
    let (package, _) = target::resolve_name(&args.target)?;
    let client = host::engine().await?;
    // Running first, then the most recent exited one.
    let all = running_of(&client, &package, args.profile.as_deref(), true).await?;
    let Some(c) = all.first() else {
        return Err(UserError(format!(
            "no container for {package}. Start it:  tt-model serve {}",
            args.target
        ))
        .into());
    };
    if !c.running {
        printer.note(&format!(
            "{} is not running ({}, exit code {}); showing its last log",
            c.name,
            c.status,
            c.exit_code.unwrap_or(-1)
        ));
    }
    let mut s = logs::LogLines::new(&client, &c.name, args.follow && c.running, args.tail);
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            line = s.next() => match line {
                Some(l) => {
                    let l = l?;
                    match l.stream {
                        LogStream::Stdout => printer.out_raw(&format!("{}\n", l.text)),
                        LogStream::Stderr => eprintln!("{}", l.text),
                    }
                }
                None => break,
            }
        }
    }
    Ok(ExitStatus::Success)
}
