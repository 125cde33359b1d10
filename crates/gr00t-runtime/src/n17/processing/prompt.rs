//! The N1.7 prompt: the backbone's own chat template rendered for one user message (every
//! image, then the instruction, as `Gr00tN1d7Processor._apply_vlm_processing` builds the
//! conversation; no generation prompt), each `<|image_pad|>` expanded to the image's token
//! count (`Qwen3VLProcessor.__call__`), then the Qwen2 BPE tokenizer.
//!
//! The template is rendered with minijinja configured as transformers configures jinja2 for
//! chat templates (`trim_blocks`, `lstrip_blocks`, a `raise_exception` global), so a
//! checkpoint whose template differs (e.g. adds a system prompt) is followed, not assumed.

use std::path::{Path, PathBuf};

use minijinja::{Environment, Value, context};
use tokenizers::Tokenizer;

use crate::tokenizer::{TokenizerError, build_qwen2_tokenizer};

/// The image placeholder of the Qwen3-VL template.
pub const IMAGE_PAD: &str = "<|image_pad|>";

/// Why the prompt could not be built.
#[derive(Debug, thiserror::Error)]
pub enum PromptError {
    /// A file could not be read (the cause is in the message, not also a `source()`).
    #[error("`{path}`: {cause}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
    /// `chat_template.json` is not JSON or has no `chat_template` string.
    #[error("`{path}`: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The template does not compile or failed to render; minijinja's message.
    #[error("chat template: {0}")]
    Template(String),
    /// The tokenizer files could not be used.
    #[error(transparent)]
    Tokenizer(#[from] TokenizerError),
    /// The rendered text has a different number of `<|image_pad|>` than there are images.
    #[error("the rendered prompt has {found} {IMAGE_PAD}, expected {expected}")]
    ImageCount {
        /// Placeholders found.
        found: usize,
        /// Images given.
        expected: usize,
    },
}

fn template_err(e: minijinja::Error) -> PromptError {
    // `{:#}` prints minijinja's chain (where in the template it failed).
    PromptError::Template(format!("{e:#}"))
}

/// The chat template and the tokenizer of the backbone's processor directory.
pub struct Prompter {
    env: Environment<'static>,
    tokenizer: Tokenizer,
    image_pad_id: u32,
}

impl std::fmt::Debug for Prompter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompter")
            .field("image_pad_id", &self.image_pad_id)
            .finish()
    }
}

/// The template source: `chat_template.jinja` where present (transformers prefers it), else
/// the `chat_template` string of `chat_template.json`.
fn read_template(dir: &Path) -> Result<String, PromptError> {
    let jinja = dir.join("chat_template.jinja");
    if jinja.is_file() {
        return std::fs::read_to_string(&jinja).map_err(|e| PromptError::Io {
            path: jinja,
            cause: e,
        });
    }
    let path = dir.join("chat_template.json");
    let text = std::fs::read_to_string(&path).map_err(|e| PromptError::Io {
        path: path.clone(),
        cause: e,
    })?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| PromptError::Format {
        path: path.clone(),
        message: e.to_string(),
    })?;
    v.get("chat_template")
        .and_then(|t| t.as_str())
        .map(str::to_owned)
        .ok_or_else(|| PromptError::Format {
            path,
            message: "`chat_template` is missing or not a string".into(),
        })
}

/// Each `<|image_pad|>` of `text` replaced by `tokens[k]` copies (k-th placeholder).
pub fn expand_image_pads(text: &str, tokens: &[usize]) -> Result<String, PromptError> {
    let parts: Vec<&str> = text.split(IMAGE_PAD).collect();
    if parts.len() != tokens.len() + 1 {
        return Err(PromptError::ImageCount {
            found: parts.len() - 1,
            expected: tokens.len(),
        });
    }
    let extra: usize = tokens.iter().map(|n| n * IMAGE_PAD.len()).sum();
    let mut out = String::with_capacity(text.len() + extra);
    for (k, p) in parts.iter().enumerate() {
        out.push_str(p);
        if let Some(&n) = tokens.get(k) {
            for _ in 0..n {
                out.push_str(IMAGE_PAD);
            }
        }
    }
    Ok(out)
}

/// The prompt of one request.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    /// The chat-template text before the image placeholders are expanded.
    pub text: String,
    /// Token ids of the expanded text.
    pub input_ids: Vec<u32>,
}

impl Prompter {
    /// Reads the chat template and the tokenizer files (`vocab.json`, `merges.txt`,
    /// `tokenizer_config.json`) of the backbone's processor directory.
    pub fn load(dir: &Path) -> Result<Self, PromptError> {
        let source = read_template(dir)?;
        let mut env = Environment::new();
        env.set_syntax(
            minijinja::syntax::SyntaxConfig::builder()
                .trim_blocks(true)
                .lstrip_blocks(true)
                .build()
                .map_err(template_err)?,
        );
        env.add_function(
            "raise_exception",
            |msg: String| -> Result<Value, minijinja::Error> {
                Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    msg,
                ))
            },
        );
        env.add_template_owned("chat", source)
            .map_err(template_err)?;
        let tokenizer = build_qwen2_tokenizer(dir)?;
        let image_pad_id = tokenizer
            .token_to_id(IMAGE_PAD)
            .ok_or_else(|| TokenizerError::MissingToken(IMAGE_PAD.into()))?;
        Ok(Self {
            env,
            tokenizer,
            image_pad_id,
        })
    }

    /// Id of `<|image_pad|>` (the backbone's `image_token_id`).
    pub fn image_pad_id(&self) -> u32 {
        self.image_pad_id
    }

    /// `processor.apply_chat_template(conversation, tokenize=False,
    /// add_generation_prompt=False)` for one user turn of `images` images then `text`.
    pub fn chat_text(&self, images: usize, text: &str) -> Result<String, PromptError> {
        let mut content: Vec<Value> = (0..images).map(|_| context! { type => "image" }).collect();
        content.push(context! { type => "text", text => text });
        let messages = vec![context! { role => "user", content => content }];
        let tmpl = self.env.get_template("chat").map_err(template_err)?;
        tmpl.render(context! { messages => messages, add_generation_prompt => false })
            .map_err(template_err)
    }

    /// `tokenizer(text)["input_ids"]` (no special tokens added).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, PromptError> {
        let enc = self
            .tokenizer
            .encode_fast(text, true)
            .map_err(|e| TokenizerError::Tokenizers(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    /// The prompt for an (already formalised) instruction and the image token count of each
    /// image in prompt order.
    pub fn prompt(&self, instruction: &str, image_tokens: &[usize]) -> Result<Prompt, PromptError> {
        let text = self.chat_text(image_tokens.len(), instruction)?;
        let expanded = expand_image_pads(&text, image_tokens)?;
        let input_ids = self.encode(&expanded)?;
        Ok(Prompt { text, input_ids })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_pads_expand_in_order_and_are_counted() {
        let t = "a<|image_pad|>b<|image_pad|>c";
        let e = expand_image_pads(t, &[1, 3]).unwrap();
        assert_eq!(e, "a<|image_pad|>b<|image_pad|><|image_pad|><|image_pad|>c");
        assert!(matches!(
            expand_image_pads(t, &[1]),
            Err(PromptError::ImageCount {
                found: 2,
                expected: 1
            })
        ));
    }
}
