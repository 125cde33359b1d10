//! `tt-model curl` arguments.

use clap::Args;

/// Send a chat completion to the model being served (any other `--key value` goes into the body).
///
/// The model id is asked of the server (`GET /v1/models`), else taken from the one installed
/// package. Any option not listed here becomes a request field, dashes as underscores and the
/// value typed as JSON: `tt-model curl "a haiku" --max-tokens 40 --temperature 0.7`. A server
/// without an OpenAI chat API (GR00T's `/predict`, a diffusion server) is refused, naming the
/// routes it does answer. Exits with curl's own exit code.
#[derive(Debug, Args)]
pub struct CurlArgs {
    /// The user message to send [default: "Say hello in one sentence."].
    #[arg(value_name = "PROMPT", allow_hyphen_values = true)]
    pub prompt: Option<String>,
    /// Print the equivalent curl command instead of sending it.
    #[arg(long = "print")]
    pub print: bool,
    /// The model id to name in the request [default: ask the running server].
    #[arg(long, value_name = "ID")]
    pub model: Option<String>,
    /// The server root [default: http://localhost:20000].
    #[arg(
        long,
        value_name = "URL",
        env = "TT_MODEL_BASE_URL",
        hide_env_values = true
    )]
    pub base_url: Option<String>,
    /// More request fields: `--max-tokens 8`, `--temperature=0.7`, `--stream` (= true).
    #[arg(
        value_name = "--KEY VALUE",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        num_args = 0..
    )]
    pub fields: Vec<String>,
}
