//! The Qwen2 tokenizer of the Eagle backbone and the GR00T prompt format.
//!
//! There is no `tokenizer.json` in the bundle: like transformers' `Qwen2Converter`, the fast
//! tokenizer is assembled from `vocab.json` + `merges.txt` (NFC normaliser, the Qwen2 split
//! regex with "isolated" behaviour, byte-level without prefix space, BPE without unk or byte
//! fallback) plus the 37 added tokens of `tokenizer_config.json` (special ones marked special).
//!
//! Prompt (Eagle `chat_template.json`, one user message: text first, then one image per camera,
//! then `replace_media_placeholder`):
//! `<|im_start|>system⏎You are a helpful assistant.<|im_end|>⏎<|im_start|>user⏎{instruction}`
//! `<image 1><img>{<IMG_CONTEXT> × n}</img>…<|im_end|>⏎`.
//! Added tokens split the text into independently tokenized segments, so the ids of the fixed
//! parts are computed once and only the segment holding the instruction is encoded per request
//! ([`QwenTokenizer::prompt_ids`]); a test checks this equals encoding the full prompt text.

use std::path::{Path, PathBuf};

use tokenizers::models::bpe::BPE;
use tokenizers::normalizers::unicode::NFC;
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// The pre-tokenizer regex of transformers' Qwen2 converter.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Id of `<IMG_CONTEXT>` (`image_token_index` of the Eagle config).
pub const IMG_CONTEXT_ID: u32 = 151669;
/// Files the tokenizer directory must hold.
pub const TOKENIZER_FILES: [&str; 3] = ["vocab.json", "merges.txt", "tokenizer_config.json"];

/// Why the tokenizer could not be built or used.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// The I/O cause is part of the message and not also a `source()`, so a report that
    /// walks the chain prints it once.
    #[error("tokenizer file `{path}`: {cause}")]
    Io {
        /// The file that could not be read.
        path: PathBuf,
        /// The underlying I/O error.
        cause: std::io::Error,
    },
    /// A tokenizer file is not in the expected format (bad JSON, a non-numeric id).
    #[error("tokenizer file `{path}`: {message}")]
    Format {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// The `tokenizers` library rejected the vocabulary, merges or normalizer; its message.
    #[error("tokenizer: {0}")]
    Tokenizers(String),
    /// A token the prompt template needs (e.g. `<IMG_CONTEXT>`) has no id in the vocabulary.
    #[error("tokenizer has no id for `{0}`")]
    MissingToken(String),
}

fn tk_err(e: impl std::fmt::Display) -> TokenizerError {
    TokenizerError::Tokenizers(e.to_string())
}

#[derive(serde::Deserialize)]
struct AddedTokenEntry {
    content: String,
    #[serde(default)]
    special: bool,
    #[serde(default)]
    lstrip: bool,
    #[serde(default)]
    rstrip: bool,
    #[serde(default)]
    single_word: bool,
    #[serde(default)]
    normalized: bool,
}

#[derive(serde::Deserialize)]
struct TokenizerConfig {
    #[serde(default)]
    added_tokens_decoder: std::collections::BTreeMap<String, AddedTokenEntry>,
}

/// The Qwen2 tokenizer plus the pre-encoded fixed parts of the GR00T prompt.
pub struct QwenTokenizer {
    inner: Tokenizer,
    prefix_ids: Vec<u32>,
    suffix_ids: Vec<u32>,
    img_start: u32,
    img_end: u32,
}

impl std::fmt::Debug for QwenTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QwenTokenizer")
            .field("vocab", &self.inner.get_vocab_size(true))
            .finish()
    }
}

/// The bare Qwen2 byte-level BPE tokenizer of a directory holding `vocab.json`, `merges.txt`
/// and `tokenizer_config.json` (its added tokens), as transformers' `Qwen2Converter` builds it;
/// shared by the N1.6 (Eagle) and N1.7 (Qwen3-VL) prompts.
pub fn build_qwen2_tokenizer(dir: &Path) -> Result<Tokenizer, TokenizerError> {
    for f in TOKENIZER_FILES {
        let p = dir.join(f);
        if !p.is_file() {
            return Err(TokenizerError::Io {
                path: p,
                cause: std::io::Error::new(std::io::ErrorKind::NotFound, "missing"),
            });
        }
    }
    let vocab = dir.join("vocab.json");
    let merges = dir.join("merges.txt");
    let bpe = BPE::from_file(&vocab.to_string_lossy(), &merges.to_string_lossy())
        .build()
        .map_err(|e| TokenizerError::Format {
            path: vocab.clone(),
            message: e.to_string(),
        })?;
    let mut tok = Tokenizer::new(bpe);
    tok.with_normalizer(Some(NFC)).map_err(tk_err)?;
    let split = Split::new(
        SplitPattern::Regex(QWEN2_SPLIT.into()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(tk_err)?;
    tok.with_pre_tokenizer(Some(Sequence::new(vec![
        split.into(),
        ByteLevel::new(false, false, false).into(),
    ])));
    tok.with_decoder(Some(ByteLevel::default()));

    let cfg_path = dir.join("tokenizer_config.json");
    let text = std::fs::read_to_string(&cfg_path).map_err(|e| TokenizerError::Io {
        path: cfg_path.clone(),
        cause: e,
    })?;
    let cfg: TokenizerConfig = serde_json::from_str(&text).map_err(|e| TokenizerError::Format {
        path: cfg_path.clone(),
        message: format!("line {} column {}: {e}", e.line(), e.column()),
    })?;
    let mut entries: Vec<(u32, AddedTokenEntry)> = Vec::new();
    for (id, e) in cfg.added_tokens_decoder {
        let id: u32 = id.parse().map_err(|_| TokenizerError::Format {
            path: cfg_path.clone(),
            message: format!("added token id `{id}` is not a number"),
        })?;
        entries.push((id, e));
    }
    entries.sort_by_key(|(id, _)| *id);
    for (id, e) in entries {
        let t = AddedToken::from(e.content.clone(), e.special)
            .lstrip(e.lstrip)
            .rstrip(e.rstrip)
            .single_word(e.single_word)
            .normalized(e.normalized);
        if e.special {
            tok.add_special_tokens([t]).map_err(tk_err)?;
        } else {
            tok.add_tokens([t]).map_err(tk_err)?;
        }
        if tok.token_to_id(&e.content) != Some(id) {
            return Err(TokenizerError::Format {
                path: cfg_path.clone(),
                message: format!(
                    "added token `{}` got id {:?}, the file says {id}",
                    e.content,
                    tok.token_to_id(&e.content)
                ),
            });
        }
    }
    Ok(tok)
}

impl QwenTokenizer {
    /// Build from a directory holding `vocab.json`, `merges.txt` and `tokenizer_config.json`.
    pub fn from_dir(dir: &Path) -> Result<Self, TokenizerError> {
        let tok = build_qwen2_tokenizer(dir)?;
        let id = |t: &str| {
            tok.token_to_id(t)
                .ok_or_else(|| TokenizerError::MissingToken(t.into()))
        };
        let img_start = id("<img>")?;
        let img_end = id("</img>")?;
        if id("<IMG_CONTEXT>")? != IMG_CONTEXT_ID {
            return Err(TokenizerError::MissingToken(
                "<IMG_CONTEXT> (expected id 151669)".into(),
            ));
        }
        let mut me = Self {
            inner: tok,
            prefix_ids: vec![],
            suffix_ids: vec![],
            img_start,
            img_end,
        };
        me.prefix_ids =
            me.encode("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>")?;
        me.suffix_ids = me.encode("<|im_end|>\n")?;
        Ok(me)
    }

    /// `tokenizer(text)["input_ids"]` (no BOS/EOS are added by this tokenizer).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        Ok(self
            .inner
            .encode_fast(text, true)
            .map_err(tk_err)?
            .get_ids()
            .to_vec())
    }

    /// `tokenizer.decode(ids)` (special tokens kept).
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.inner.decode(ids, false).map_err(tk_err)
    }

    /// Id of one token string.
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Token ids of the whole GR00T prompt for an already formalized instruction and
    /// `image_tokens[k]` `<IMG_CONTEXT>` tokens for camera k.
    pub fn prompt_ids(
        &self,
        instruction: &str,
        image_tokens: &[usize],
    ) -> Result<Vec<u32>, TokenizerError> {
        let mut ids = self.prefix_ids.clone();
        for (k, &n) in image_tokens.iter().enumerate() {
            let seg = if k == 0 {
                format!("user\n{instruction}<image 1>")
            } else {
                format!("<image {}>", k + 1)
            };
            ids.extend(self.encode(&seg)?);
            ids.push(self.img_start);
            ids.extend(std::iter::repeat_n(IMG_CONTEXT_ID, n));
            ids.push(self.img_end);
        }
        if image_tokens.is_empty() {
            ids.extend(self.encode(&format!("user\n{instruction}"))?);
        }
        ids.extend_from_slice(&self.suffix_ids);
        Ok(ids)
    }
}

/// The prompt text after the chat template and `replace_media_placeholder` (for tests and
/// debugging; [`QwenTokenizer::prompt_ids`] is the fast path).
pub fn prompt_text(instruction: &str, image_tokens: &[usize]) -> String {
    let mut s = format!(
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n{instruction}"
    );
    for (k, &n) in image_tokens.iter().enumerate() {
        s.push_str(&format!("<image {}><img>", k + 1));
        for _ in 0..n {
            s.push_str("<IMG_CONTEXT>");
        }
        s.push_str("</img>");
    }
    s.push_str("<|im_end|>\n");
    s
}

/// Python `str.isspace()`: Unicode White_Space plus the ASCII separators U+001C..U+001F.
fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python `re`'s `\w` for `str` patterns: letters (L*), numbers (N*), underscore.
fn py_word(c: char) -> bool {
    use unicode_categories::UnicodeCategories;
    c == '_'
        || c.is_numeric()
        || (c.is_alphabetic()
            && !(c.is_mark_nonspacing()
                || c.is_mark_spacing_combining()
                || c.is_mark_enclosing()
                || c.is_symbol_other()))
}

/// The processor's `formalize_language`: `re.sub(r"[^\w\s]", "", text.lower())`.
pub fn formalize_instruction(text: &str) -> String {
    text.to_lowercase()
        .chars()
        .filter(|&c| py_word(c) || py_isspace(c))
        .collect()
}
