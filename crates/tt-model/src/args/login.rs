//! `tt-model login` / `logout` arguments.

use clap::Args;

/// Store a Hugging Face token for push, publish and private pulls.
///
/// The token is `--token`'s value when given (non-interactive, as `tt model login --token`
/// runs it; a value on the command line is visible to `ps` and kept by shell history, so prefer
/// the other two), else read from standard input when it is piped (`tt-model login <
/// token.txt`), else from a prompt that does not echo. It is checked with the Hub, then stored
/// where `huggingface_hub` keeps it (`$HF_HOME/token`, default `~/.cache/huggingface/token`),
/// mode 0600, and never printed. `HF_TOKEN`, when set, wins over the stored token.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The token to store, instead of reading it from standard input or a prompt.
    #[arg(long, value_name = "TOKEN")]
    pub token: Option<String>,
}

/// Remove the stored Hugging Face token.
#[derive(Debug, Args)]
pub struct LogoutArgs {}
