//! Prints every finding for the manifests given as arguments (the library half of
//! `tt-model lint`, without the CLI): `cargo run -p tt-model-manifest --example check -- FILE…`.

// This program's measurements and findings are its output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

fn main() {
    let mut failed = false;
    for path in std::env::args().skip(1) {
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("{path}: {e}");
                failed = true;
                continue;
            }
        };
        let report = tt_model_manifest::check_bytes(&bytes, &Default::default());
        let src = String::from_utf8_lossy(&bytes);
        for d in &report.diagnostics {
            println!("{}", d.render(&path, &src, false));
        }
        failed |= report.has_errors();
    }
    std::process::exit(i32::from(failed));
}
