//! A served model's OpenAI API, for `curl`: which model ids the server lists, the one-shot chat
//! request (as the real `curl` sends it, and as `--print` shows it), and, for a server with no
//! chat API, the routes it does answer.
//!
//! The request body and the printed command are byte-for-byte the original's: Python's
//! `json.dumps` spacing and `\uXXXX` escapes, `shlex.quote` quoting, one flag pair per line.
//! The probes speak plain HTTP/1.1 over a socket (the served endpoint is a loopback `http://`
//! URL); nothing else in this crate needs an HTTP client.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::LocalError;

/// Where `serve` puts a server when nothing names a port.
pub const DEFAULT_BASE_URL: &str = "http://localhost:20000";
/// Overrides [`DEFAULT_BASE_URL`].
pub const ENV_BASE_URL: &str = "TT_MODEL_BASE_URL";
/// The message sent when no prompt is given.
pub const DEFAULT_PROMPT: &str = "Say hello in one sentence.";
/// `max_tokens` unless `--max-tokens` says otherwise.
pub const DEFAULT_MAX_TOKENS: u64 = 64;
/// The chat completions route, under the server root.
pub const CHAT_PATH: &str = "/v1/chat/completions";
/// How long one probe may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Paths asked of a server that lists no chat API, to say what it does answer. Our GR00T
/// server's routes, the DiT and audio servers' OpenAI-shaped media routes, and the usual
/// documentation endpoints.
pub const CANDIDATE_ROUTES: &[&str] = &[
    "/health",
    "/v1/health",
    "/info",
    "/predict",
    "/demo",
    "/v1/models",
    "/v1/images/generations",
    "/v1/audio/speech",
    "/docs",
    "/openapi.json",
];

/// A `--key value` the command does not reserve → a request field: dashes become underscores,
/// the value is JSON when it parses as JSON (`0.7`, `200`, `true`, `[1,2]`), else the string;
/// a `--flag` with no value is `true`. Later keys override earlier ones in place.
pub fn parse_extra_params(extra: &[String]) -> Result<Vec<(String, Value)>, LocalError> {
    let mut params: Vec<(String, Value)> = Vec::new();
    let mut i = 0;
    while i < extra.len() {
        let token = &extra[i];
        let Some(flag) = token.strip_prefix("--") else {
            return Err(LocalError::refused(
                "prompt",
                format!(
                    "unexpected argument '{token}' (quote the prompt, or use --key value)\n  usage: tt-model curl \"your prompt\" [--key value ...]"
                ),
            ));
        };
        let (key, value) = match flag.split_once('=') {
            Some((k, v)) => (k, parse_param(v)),
            None => match extra.get(i + 1).filter(|v| !v.starts_with("--")) {
                Some(v) => {
                    i += 1;
                    (flag, parse_param(v))
                }
                None => (flag, Value::Bool(true)),
            },
        };
        let key = key.replace('-', "_");
        match params.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => params.push((key, value)),
        }
        i += 1;
    }
    Ok(params)
}

/// A CLI value as its JSON type, else the string as given.
pub fn parse_param(raw: &str) -> Value {
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// `params` applied to a request body: each overrides the field of its name in place, or is
/// added at the end (the order the original writes them in).
pub fn apply_params(body: &mut Vec<(String, Value)>, params: &[(String, Value)]) {
    for (k, v) in params {
        match body.iter_mut().find(|(bk, _)| bk == k) {
            Some(slot) => slot.1 = v.clone(),
            None => body.push((k.clone(), v.clone())),
        }
    }
}

/// `body` as Python's `json.dumps` writes it (`", "` and `": "`, non-ASCII as `\uXXXX`), so
/// the request and the printed command match the original's byte for byte. Every object
/// keeps the order it was built in.
pub fn python_json(body: &[(String, Value)]) -> String {
    let mut out = String::from("{");
    for (i, (k, v)) in body.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        write_str(&mut out, k);
        out.push_str(": ");
        write_value(&mut out, v);
    }
    out.push('}');
    out
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_str(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, x);
            }
            out.push(']');
        }
        Value::Object(m) => {
            // In the order the body was built (the build's serde_json keeps insertion order:
            // tt-model-manifest turns on `preserve_order`; the test below pins it).
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_value(out, x);
            }
            out.push('}');
        }
    }
}

fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7f => {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The `curl` argv that POSTs `body_json` to `path` of the server at `base_url`: `-sS` (no
/// progress meter, transport errors still shown).
pub fn curl_argv(base_url: &str, path: &str, body_json: &str) -> Vec<String> {
    [
        "curl",
        "-sS",
        &format!("{}{path}", base_url.trim_end_matches('/')),
        "-H",
        "Content-Type: application/json",
        "-d",
        body_json,
    ]
    .map(str::to_owned)
    .to_vec()
}

/// One shell word, quoted as Python's `shlex.quote` quotes it (the workspace's one quoter).
pub use tt_model_manifest::shell::shlex_quote as shell_quote;

/// `argv` as a copy-pasteable command: the first three words, then one pair per
/// backslash-continued line.
pub fn render_curl(argv: &[String]) -> String {
    let quote = |w: &[String]| {
        w.iter()
            .map(|a| shell_quote(a))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let head = argv.len().min(3);
    let mut lines = vec![quote(&argv[..head])];
    for pair in argv[head..].chunks(2) {
        lines.push(format!("  {}", quote(pair)));
    }
    lines.join(" \\\n")
}

/// One HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// `Allow` (the methods a route takes), when sent.
    pub allow: Option<String>,
    /// The body (chunked transfer decoded).
    pub body: Vec<u8>,
}

/// `http://host[:port][/prefix]` → (`host:port`, `/prefix` without a trailing slash). `None`
/// for any other scheme: only a plain-HTTP endpoint is probed.
pub fn split_base(base_url: &str) -> Option<(String, String)> {
    let rest = base_url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    if authority.is_empty() {
        return None;
    }
    let addr = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_owned()
    } else {
        format!("{authority}:80")
    };
    Some((addr, path.to_owned()))
}

/// `GET <base><path>` with [`PROBE_TIMEOUT`]; `None` when nothing answers (or not `http://`).
pub async fn get(base_url: &str, path: &str) -> Option<Reply> {
    let (addr, prefix) = split_base(base_url)?;
    let attempt = async {
        let mut s = tokio::net::TcpStream::connect(&addr).await.ok()?;
        let req = format!(
            "GET {prefix}{path} HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: tt-model\r\nAccept: application/json\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.ok()?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.ok()?;
        parse_reply(&raw)
    };
    tokio::time::timeout(PROBE_TIMEOUT, attempt).await.ok()?
}

/// An HTTP/1.x response: status, `Allow`, body (content-length, chunked or to the end).
pub fn parse_reply(raw: &[u8]) -> Option<Reply> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next()?.split_whitespace().nth(1)?.parse().ok()?;
    let (mut allow, mut chunked, mut length) = (None, false, None);
    for line in lines {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        match k.as_str() {
            "allow" => allow = Some(v.to_owned()),
            "transfer-encoding" => chunked = v.eq_ignore_ascii_case("chunked"),
            "content-length" => length = v.parse::<usize>().ok(),
            _ => {}
        }
    }
    let rest = &raw[split + 4..];
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest[..length.unwrap_or(rest.len()).min(rest.len())].to_vec()
    };
    Some(Reply {
        status,
        allow,
        body,
    })
}

fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let size_text = String::from_utf8_lossy(&rest[..eol]);
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Some(body);
        }
        body.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

/// The model ids a `GET /v1/models` reply lists (empty: not a 2xx, or not that shape).
pub fn model_ids(reply: &Reply) -> Vec<String> {
    if !(200..300).contains(&reply.status) {
        return Vec::new();
    }
    let v: Value = serde_json::from_slice(&reply.body).unwrap_or(Value::Null);
    v["data"]
        .as_array()
        .map(|d| {
            d.iter()
                .filter_map(|m| m["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// The model ids `GET /v1/models` lists (empty: nothing answers, or not that shape).
pub async fn list_models(base_url: &str) -> Vec<String> {
    get(base_url, "/v1/models")
        .await
        .map(|r| model_ids(&r))
        .unwrap_or_default()
}

/// What the server answers among [`CANDIDATE_ROUTES`]: `GET /info` for a route that answered
/// a GET (any status but 404 and 405: a 503 while loading is still the route), `POST /predict`
/// for one that refused GET naming the methods it takes.
pub async fn routes(base_url: &str) -> Vec<String> {
    let mut found = Vec::new();
    for path in CANDIDATE_ROUTES {
        let Some(r) = get(base_url, path).await else {
            continue;
        };
        match r.status {
            404 => {}
            405 => {
                let methods = r.allow.unwrap_or_else(|| "POST".into());
                for m in methods.split(',').map(str::trim).filter(|m| !m.is_empty()) {
                    if m != "HEAD" && m != "OPTIONS" {
                        found.push(format!("{m} {path}"));
                    }
                }
            }
            _ => found.push(format!("GET {path}")),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chat body as `curl`'s text-generation task starts one.
    fn chat(model: &str, prompt: &str) -> Vec<(String, Value)> {
        vec![
            ("model".to_owned(), Value::from(model)),
            (
                "messages".to_owned(),
                serde_json::json!([{"role": "user", "content": prompt}]),
            ),
            ("max_tokens".to_owned(), Value::from(DEFAULT_MAX_TOKENS)),
        ]
    }

    #[test]
    fn objects_keep_their_order_and_python_spacing() {
        let body = vec![
            ("model".to_string(), serde_json::json!("m")),
            (
                "messages".to_string(),
                serde_json::json!([{"role": "user", "content": [{"type": "text", "text": "é\"\n😀"}]}]),
            ),
            ("n".to_string(), serde_json::json!([1, 0.5, true, null])),
        ];
        assert_eq!(
            python_json(&body),
            r#"{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "\u00e9\"\n\ud83d\ude00"}]}], "n": [1, 0.5, true, null]}"#
        );
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn extra_options_become_typed_fields() {
        let p = parse_extra_params(&s(&[
            "--max-tokens",
            "8",
            "--temperature=0.7",
            "--stop",
            "[\"x\"]",
            "--stream",
            "--user",
            "me",
        ]))
        .unwrap();
        let mut body = chat("m", "hi");
        apply_params(&mut body, &p);
        assert_eq!(
            python_json(&body),
            r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0.7, "stop": ["x"], "stream": true, "user": "me"}"#
        );
        let e = parse_extra_params(&s(&["hello"])).unwrap_err().to_string();
        assert!(e.contains("unexpected argument 'hello'"), "{e}");
    }

    #[test]
    fn json_and_quoting_match_python() {
        let body = chat("m", "héllo \"q\" it's\n");
        let j = python_json(&body);
        assert!(j.contains(r#""content": "h\u00e9llo \"q\" it's\n""#), "{j}");
        let argv = curl_argv("http://127.0.0.1:9/", CHAT_PATH, &j);
        assert_eq!(argv[2], "http://127.0.0.1:9/v1/chat/completions");
        let shown = render_curl(&argv);
        let want = format!(
            "curl -sS http://127.0.0.1:9/v1/chat/completions \\\n  -H 'Content-Type: application/json' \\\n  -d '{}'",
            j.replace('\'', "'\"'\"'")
        );
        assert_eq!(shown, want);
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a/b:c,d@e%f+g=h"), "a/b:c,d@e%f+g=h");
    }

    #[test]
    fn base_urls_and_replies() {
        assert_eq!(
            split_base("http://localhost:20000/"),
            Some(("localhost:20000".into(), String::new()))
        );
        assert_eq!(
            split_base("http://h/api/"),
            Some(("h:80".into(), "/api".into()))
        );
        assert_eq!(split_base("https://h"), None);
        let r = parse_reply(
            b"HTTP/1.1 405 Method Not Allowed\r\nallow: POST\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (r.status, r.allow.as_deref(), r.body.as_slice()),
            (405, Some("POST"), &b"abcde"[..])
        );
        let r = parse_reply(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}xx").unwrap();
        assert_eq!(r.body, b"{}");
    }
}
