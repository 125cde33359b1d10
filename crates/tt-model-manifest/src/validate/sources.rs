//! `--check-sources`: the file-system checks `package` runs before staging, from
//! [`crate::sources`] (the one implementation both use), plus whether `runtime.app`'s package
//! is shipped. Paths resolve against a base directory (the working directory of `tt-model`,
//! as in the original).

use std::path::Path;

use super::Checker;
use crate::types::{KindRuntime, RuntimeSpec, TtDitServerRuntime};

pub(super) fn check(c: &mut Checker<'_>, base: &Path) {
    for problem in crate::sources::check(c.m, base) {
        let d = c.error(problem.code, &problem.field, problem.message);
        d.help = problem.help;
    }
    app_shipped(c);
}

/// `tt-dit-server`'s `runtime.app` imports a package that some code entry must ship.
fn app_shipped(c: &mut Checker<'_>) {
    let m = c.m;
    let Ok(RuntimeSpec {
        kind: KindRuntime::TtDitServer(TtDitServerRuntime { app: Some(app), .. }),
        ..
    }) = m.runtime_spec()
    else {
        return;
    };
    let package = app.split([':', '.']).next().unwrap_or_default();
    let shipped = m.source.all_code_paths().any(|p| {
        let first = p
            .trim_start_matches("./")
            .split('/')
            .next()
            .unwrap_or_default();
        first == package || first == format!("{package}.py")
    });
    if !package.is_empty() && !shipped {
        c.error(
            "app-not-shipped",
            "runtime.app",
            format!("runtime.app '{app}' imports package '{package}', which no source.code or source.extra_code entry ships"),
        )
        .help = Some(format!("add '{package}' to source.code or to an extra_code entry's paths"));
    }
}
