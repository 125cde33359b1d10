//! The `tt-model` binary: parse, run, exit. Everything lives in the library half.

fn main() -> std::process::ExitCode {
    tt_model::main()
}
