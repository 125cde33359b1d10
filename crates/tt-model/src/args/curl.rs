//! `tt-model curl` arguments.

use clap::Args;
use clap::builder::PossibleValuesParser;

/// Send the served model one request for its task (any other `--key value` goes into the body).
///
/// The task is a Hugging Face pipeline tag: `--task`, else the served package's card, else
/// text-generation. text-generation sends a chat completion, image-text-to-text one with a small
/// PNG (224×224, red above blue) as a data URL, text-to-image asks /v1/images/generations (the
/// image is saved to a file), feature-extraction /v1/embeddings; robotics (GR00T) posts the
/// server's own demo observation (GET /demo) to /predict, and is also chosen when a server
/// without chat completions answers /demo. automatic-speech-recognition, text-to-speech,
/// text-to-video and image-classification have no request: only the health route is checked.
///
/// `--tools` offers a chat model a `get_weather` tool and asks for a call to it; an answer
/// without a tool call exits 1. The model id is asked of the server (`GET /v1/models`), else
/// taken from the one installed package. Any option not listed here becomes a request field,
/// dashes as underscores and the value typed as JSON: `tt-model curl "a haiku" --max-tokens 40
/// --temperature 0.7`. The answer is printed as text; an error answer exits 1, a failed
/// transfer with curl's own exit code (28 when no answer comes within the task's timeout).
#[derive(Debug, Args)]
pub struct CurlArgs {
    /// The prompt (robotics: the instruction) [default: the task's own, e.g. "Say hello in one
    /// sentence."].
    #[arg(value_name = "PROMPT", allow_hyphen_values = true)]
    pub prompt: Option<String>,
    /// Print the equivalent curl command instead of sending it.
    #[arg(long = "print")]
    pub print: bool,
    /// The task the served model performs, as a Hugging Face pipeline tag [default: the served
    /// package's card, else text-generation].
    #[arg(long, value_name = "TASK", value_parser = PossibleValuesParser::new(CurlArgs::TASKS))]
    pub task: Option<String>,
    /// Offer a chat model a weather tool and ask for a call to it (no tool call: exit 1).
    #[arg(long)]
    pub tools: bool,
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

impl CurlArgs {
    /// Every task `--task` takes: the library's list (`tt_model_local::curl::task`).
    pub const TASKS: [&str; 9] = tt_model_local::curl::task::TASKS;
}
