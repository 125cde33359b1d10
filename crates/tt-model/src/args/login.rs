//! `tt-model login` / `logout` arguments.

use clap::Args;

/// Store a Hugging Face token for push, publish and private pulls.
///
/// The token is read from standard input when it is piped (`tt-model login < token.txt`), else
/// from a prompt that does not echo; it is never taken from the command line (where `ps` and the
/// shell history would keep it). It is checked with the Hub, then stored where
/// `huggingface_hub` keeps it (`$HF_HOME/token`, default `~/.cache/huggingface/token`), mode
/// 0600, and never printed. `HF_TOKEN`, when set, wins over the stored token.
#[derive(Debug, Args)]
pub struct LoginArgs {}

/// Remove the stored Hugging Face token.
#[derive(Debug, Args)]
pub struct LogoutArgs {}
