//! serve's watch: the boot checklist until the container is ready by both signals (the
//! kind's ready line AND the health endpoint), a detach on Ctrl-C, or a diagnosis card.

use std::time::Instant;

use tt_model_local::bootlog::BootTracker;
use tt_model_local::diagnose::{Card, diagnose};
use tt_model_local::package::Package;
use tt_model_local::watch::{WaitEvent, WaitOutcome, wait_ready};

use super::checklist;
use crate::ExitStatus;
use crate::args::ServeArgs;
use crate::events::DiagnosisCard;
use crate::printer::Printer;
use tt_model_local::serve::{Settings, Started};

/// The boot diagnosis as the printer's card.
pub(crate) fn card_for_printer(c: &Card) -> DiagnosisCard {
    DiagnosisCard {
        cause: c.title.clone(),
        // The evidence line, then the lines it quotes (a lost device's worker output).
        evidence: c
            .evidence
            .iter()
            .cloned()
            .chain(c.evidence_lines.iter().map(|l| format!("  | {l}")))
            .collect(),
        consequence: Some(c.detail.clone()),
        actions: c.actions.clone(),
    }
}

/// Watches the started container boot; `t0`: when serve started, for the total time.
pub(crate) async fn watch(
    args: &ServeArgs,
    pkg: &Package,
    s: &Settings,
    started: Started,
    t0: Instant,
    printer: &Printer,
) -> anyhow::Result<ExitStatus> {
    let Started {
        client,
        name,
        port,
        plan,
    } = started;
    let host_ip = if args.expose { "0.0.0.0" } else { "127.0.0.1" };
    let endpoint = format!("http://{host_ip}:{port}");
    if args.detach {
        printer.note(&format!("endpoint (once ready): {endpoint}"));
        printer.next(&format!(
            "follow the boot: tt-model logs {} -f",
            args.target
        ));
        return Ok(ExitStatus::Success);
    }

    // Readiness.
    let mut tracker = BootTracker::new(&pkg.kind);
    let mut list = checklist::Checklist::new(printer, &pkg.kind, plan.ready.health_path.is_some());
    let t_wait = Instant::now();
    let cancel = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let outcome = wait_ready(
        &client,
        &name,
        &plan.ready,
        &mut tracker,
        |e| list.on_event(e),
        cancel,
    )
    .await;
    if matches!(outcome, Ok(WaitOutcome::Ready { .. })) {
        for e in tracker.finish_all() {
            list.on_event(&WaitEvent::Boot(e));
        }
    }
    list.clear();
    match outcome? {
        WaitOutcome::Ready {
            elapsed, log_ready, ..
        } => {
            let total = t0.elapsed();
            printer.done(
                &format!("{} ready", args.target),
                Some(&format!("{:.1}s", total.as_secs_f64())),
            );
            let by = match (log_ready.is_some(), plan.ready.health_path.is_some()) {
                (true, true) => "ready line + health endpoint",
                (true, false) => "ready line",
                _ => "health endpoint",
            };
            printer.note(&format!("endpoint: {endpoint}  (ready by {by})"));
            printer.note(&format!("try: curl {endpoint}{}", pkg.health_path()));
            printer.next(&format!("follow the log: tt-model logs {} -f", args.target));
            printer.next(&format!("stop it: tt-model stop {}", args.target));
            if printer.verbose() {
                let overhead = total.saturating_sub(elapsed);
                printer.note(&format!(
                    "timing: serve→ready {:.2}s = serve overhead {:.2}s (preflight, image, weights, chips, create) + container boot {:.2}s",
                    total.as_secs_f64(),
                    overhead.as_secs_f64(),
                    t_wait.elapsed().min(elapsed).as_secs_f64()
                ));
            }
            Ok(ExitStatus::Success)
        }
        WaitOutcome::Detached { .. } => {
            // As the original: Ctrl-C stops the watching, not the server; exit 130.
            printer.skipped(
                "Ctrl-C: detached from the boot; the container keeps booting",
                Some(&name),
            );
            printer.note(&format!("endpoint (once ready): {endpoint}"));
            printer.next(&format!(
                "follow the boot: tt-model logs {} -f",
                args.target
            ));
            printer.next(&format!("stop it: tt-model stop {}", args.target));
            Ok(ExitStatus::Interrupted)
        }
        WaitOutcome::Exited { evidence, .. } | WaitOutcome::TimedOut { evidence, .. } => {
            let c = diagnose(&evidence, &args.target, &s.extra, port, s.timeout);
            printer.fail(&card_for_printer(&c));
            Ok(ExitStatus::Failure)
        }
    }
}
