//! `tt-model push <staged dir> [--repo ns/name] [--private|--public] [--publish]`: upload a
//! staged container package to a Hub repo (reference §1.4, §5.2; the use case is
//! `tt_model_local::push`). Here: the request, and the commit on stdout.

use tt_model_local::Local;
use tt_model_local::push::{self, PushRequest};

use crate::ExitStatus;
use crate::args::PushArgs;
use crate::printer::Printer;

/// Runs `tt-model push`.
pub fn run(args: &PushArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let rt = crate::runtime()?;
    let req = PushRequest {
        dir: &args.dir,
        repo: args.repo.as_deref(),
        private: args.private,
        public: args.public,
        publish: args.publish,
    };
    let pushed = rt.block_on(push::push(local, &req, printer))?;
    let commit = &pushed.outcome.commit;
    printer.done(
        &format!("pushed {}", pushed.repo),
        Some(&format!(
            "commit {commit} · recorded in {}",
            pushed.record.display()
        )),
    );
    printer.out(commit);
    printer.next(&format!("consumers:  tt-model serve {}", pushed.repo));
    Ok(ExitStatus::Success)
}
