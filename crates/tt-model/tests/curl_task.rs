//! `tt-model curl --task`: the request each task sends, through the real `curl`, to small
//! loopback HTTP servers that record what they get. The OpenAI-shaped tasks (chat, chat with
//! the sample image, image generation, embeddings), the tool-calling probe, the health-only
//! tasks, and the GR00T `/predict` probe fed the server's own `/demo` observation.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use common::*;
use serde_json::{Value, json};

/// One request: method, path, body.
#[derive(Debug, Clone)]
struct Req {
    method: String,
    path: String,
    body: Vec<u8>,
}

impl Req {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

/// A loopback HTTP/1.1 server answering with `route` (status, JSON body) and recording every
/// request it gets.
struct Recorder {
    base: String,
    log: Arc<Mutex<Vec<Req>>>,
}

impl Recorder {
    fn start(route: fn(&Req) -> (u16, String)) -> Recorder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut r = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                if r.read_line(&mut line).is_err() {
                    continue;
                }
                let mut parts = line.split_whitespace();
                let method = parts.next().unwrap_or("").to_string();
                let path = parts.next().unwrap_or("").to_string();
                let (mut length, mut expect) = (0, false);
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                        break;
                    }
                    let h = h.to_ascii_lowercase();
                    if let Some(v) = h.strip_prefix("content-length:") {
                        length = v.trim().parse().unwrap_or(0);
                    }
                    expect |= h.starts_with("expect:") && h.contains("100-continue");
                }
                let mut s = stream;
                if expect {
                    let _ = s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n");
                }
                let mut body = vec![0; length];
                let _ = r.read_exact(&mut body);
                let req = Req { method, path, body };
                let (status, answer) = route(&req);
                seen.lock().unwrap().push(req);
                let _ = write!(
                    s,
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                    answer.len()
                );
            }
        });
        Recorder { base, log }
    }

    /// The POSTs received since the last call (the GETs are the command's probes).
    fn posts(&self) -> Vec<Req> {
        let mut log = self.log.lock().unwrap();
        log.drain(..).filter(|r| r.method == "POST").collect()
    }

    fn paths(&self) -> Vec<String> {
        let mut log = self.log.lock().unwrap();
        log.drain(..)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect()
    }
}

/// The PNG the generation server answers with: a 2×1 image (its bytes only matter as bytes).
const TINY_PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAAEElEQVR4nGP4z8DAwMDAAAAJ/QH/Dp5lKAAAAABJRU5ErkJggg==";

/// An OpenAI-shaped server: chat (a tool call when offered tools, unless the prompt says
/// "no tool"), image generation, embeddings.
fn openai(req: &Req) -> (u16, String) {
    let sent: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let answer = match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/v1/models") => json!({"object": "list", "data": [{"id": "acme/m"}]}),
        ("GET", "/v1/chat/completions") => return (405, "{}".into()),
        ("POST", "/v1/chat/completions") => {
            let prompt = match &sent["messages"][0]["content"] {
                Value::String(s) => s.clone(),
                parts => parts[0]["text"].as_str().unwrap_or("").to_string(),
            };
            let message = if sent.get("tools").is_some() && !prompt.contains("no tool") {
                json!({"content": null, "tool_calls": [{"id": "c1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]})
            } else {
                json!({"content": format!("you said: {prompt}")})
            };
            json!({"choices": [{"message": message}]})
        }
        ("POST", "/v1/images/generations") => json!({"images": [TINY_PNG_B64]}),
        ("POST", "/v1/embeddings") => json!({"data": [{"embedding": [0.5, -1.0, 0.25]}]}),
        _ => return (404, json!({"detail": "Not Found"}).to_string()),
    };
    (200, answer.to_string())
}

fn run(tmp: &std::path::Path, base: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["curl", "--base-url", base];
    all.extend_from_slice(args);
    tt_model(tmp, &[("TMPDIR", tmp.to_str().unwrap())], &all)
}

/// Reads `png` with Python's own zlib (an independent decoder): every chunk's CRC, the header,
/// and whether the rows are all red above all blue.
fn python_reads_png(png: &[u8]) -> String {
    let script = r#"
import struct, sys, zlib
png = sys.stdin.buffer.read()
assert png[:8] == b"\x89PNG\r\n\x1a\n", "signature"
pos, chunks = 8, []
while pos < len(png):
    n, = struct.unpack(">I", png[pos:pos + 4])
    tag, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + n]
    crc, = struct.unpack(">I", png[pos + 8 + n:pos + 12 + n])
    assert zlib.crc32(tag + data) == crc, tag
    chunks.append((tag, data))
    pos += 12 + n
w, h, depth, color, comp, filt, lace = struct.unpack(">IIBBBBB", chunks[0][1])
raw = zlib.decompress(b"".join(d for t, d in chunks if t == b"IDAT"))
row = 1 + 3 * w
rows = [raw[y * row:(y + 1) * row] for y in range(h)]
top = all(r == b"\0" + b"\xff\0\0" * w for r in rows[:h // 2])
bottom = all(r == b"\0" + b"\0\0\xff" * w for r in rows[h // 2:])
print(w, h, depth, color, lace, [t.decode() for t, _ in chunks], len(raw) == row * h, top, bottom)
"#;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (scripts/setup.sh needs it too)");
    child.stdin.take().unwrap().write_all(png).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn each_task_sends_its_request_and_prints_the_answer() {
    let tmp = TempDir::new("curl-tasks");
    let t = &tmp.0;
    let server = Recorder::start(openai);
    let base = server.base.clone();

    // text-generation, the default: the original's chat body, the answer as text.
    let o = run(t, &base, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "you said: Say hello in one sentence.\n");
    let posts = server.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].path, "/v1/chat/completions");
    assert_eq!(
        String::from_utf8_lossy(&posts[0].body),
        r#"{"model": "acme/m", "messages": [{"role": "user", "content": "Say hello in one sentence."}], "max_tokens": 64}"#
    );

    // image-text-to-text: a text part and the sample PNG as a data URL.
    let o = run(
        t,
        &base,
        &["--task", "image-text-to-text", "--max-tokens", "9"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "you said: Which colours are in this image, and where?\n"
    );
    let sent = server.posts().remove(0);
    assert_eq!(sent.path, "/v1/chat/completions");
    let body = sent.json();
    assert_eq!(body["model"], "acme/m");
    assert_eq!(body["max_tokens"], 9);
    let content = &body["messages"][0]["content"];
    assert_eq!(body["messages"][0]["role"], "user");
    assert_eq!(
        content[0],
        json!({"type": "text", "text": "Which colours are in this image, and where?"})
    );
    assert_eq!(content[1]["type"], "image_url");
    let url = content[1]["image_url"]["url"].as_str().unwrap();
    let b64 = url.strip_prefix("data:image/png;base64,").expect(url);
    let png = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    assert_eq!(
        python_reads_png(&png),
        "224 224 8 2 0 ['IHDR', 'IDAT', 'IEND'] True True True",
        "224×224 8-bit RGB, red above blue"
    );
    assert!(png.len() < 4096, "compressed: {} bytes", png.len());

    // text-to-image: /v1/images/generations; the image is saved and named.
    let o = run(t, &base, &["--task", "text-to-image", "--size", "512x512"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let sent = server.posts().remove(0);
    assert_eq!(sent.path, "/v1/images/generations");
    assert_eq!(
        String::from_utf8_lossy(&sent.body),
        r#"{"model": "acme/m", "prompt": "A photo of an astronaut riding a horse on the moon", "size": "512x512"}"#
    );
    let line = stdout(&o);
    let path = line
        .strip_prefix("image: ")
        .and_then(|l| l.split(" (").next())
        .expect(&line);
    assert!(
        path.starts_with(t.to_str().unwrap()) && path.ends_with(".png"),
        "{line}"
    );
    let want = base64::engine::general_purpose::STANDARD
        .decode(TINY_PNG_B64)
        .unwrap();
    assert_eq!(std::fs::read(path).unwrap(), want);
    assert!(
        line.ends_with(&format!("({} bytes)\n", want.len())),
        "{line}"
    );

    // feature-extraction: /v1/embeddings, the vector's size and head.
    let o = run(t, &base, &["a sentence", "--task=feature-extraction"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "3-dimensional embedding: [0.5000, -1.0000, 0.2500, ...]\n"
    );
    let sent = server.posts().remove(0);
    assert_eq!(sent.path, "/v1/embeddings");
    assert_eq!(
        sent.json(),
        json!({"model": "acme/m", "input": "a sentence"})
    );

    // --print: the same body on the task's route, nothing sent.
    let o = run(t, &base, &["--task", "feature-extraction", "--print"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!(
            "curl -sS {base}/v1/embeddings \\\n  -H 'Content-Type: application/json' \\\n  -d '{{\"model\": \"acme/m\", \"input\": \"Tenstorrent builds hardware for AI.\"}}'\n"
        )
    );
    assert!(server.posts().is_empty());
}

#[test]
fn the_tool_calling_probe_needs_a_tool_call() {
    let tmp = TempDir::new("curl-tools");
    let server = Recorder::start(openai);
    let o = run(&tmp.0, &server.base, &["--tools"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "tool call: get_weather({\"city\": \"Paris\"})\n"
    );
    let body = server.posts().remove(0).json();
    assert_eq!(
        body["messages"][0]["content"],
        "What is the weather in Paris right now?"
    );
    let tool = &body["tools"][0];
    assert_eq!(tool["type"], "function");
    assert_eq!(tool["function"]["name"], "get_weather");
    assert_eq!(tool["function"]["parameters"]["required"], json!(["city"]));
    assert_eq!(
        tool["function"]["parameters"]["properties"]["city"]["type"],
        "string"
    );

    // Answered in prose: an answer, but not the one asked for.
    let o = run(&tmp.0, &server.base, &["no tool here", "--tools"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(stdout(&o), "you said: no tool here\n");
    assert!(
        stderr(&o).contains("asked for a tool call (get_weather) and the answer has none"),
        "{}",
        stderr(&o)
    );
    assert!(server.posts()[0].json()["tools"].is_array());
}

fn health_ok(req: &Req) -> (u16, String) {
    match req.path.as_str() {
        "/health" => (200, json!({"status": "ok"}).to_string()),
        _ => (404, "{}".into()),
    }
}

fn media_loading(req: &Req) -> (u16, String) {
    match req.path.as_str() {
        "/v1/health" => (503, json!({"status": "loading"}).to_string()),
        _ => (404, "{}".into()),
    }
}

#[test]
fn health_only_tasks_ask_the_health_route_and_send_nothing() {
    let tmp = TempDir::new("curl-health");
    let t = &tmp.0;
    let up = Recorder::start(health_ok);
    for task in [
        "automatic-speech-recognition",
        "text-to-speech",
        "text-to-video",
        "image-classification",
    ] {
        let o = run(t, &up.base, &["--task", task]);
        assert_eq!(o.status.code(), Some(0), "{task}: {}", stderr(&o));
        assert_eq!(stdout(&o), "{\"status\":\"ok\"}\n");
        assert!(
            stderr(&o).contains(&format!("{}/health answers 200", up.base)),
            "{}",
            stderr(&o)
        );
        assert!(stderr(&o).contains(task), "{}", stderr(&o));
        let asked = up.paths();
        assert!(asked.iter().all(|p| p.starts_with("GET ")), "{asked:?}");
        assert!(asked.contains(&"GET /health".to_string()), "{asked:?}");
    }

    // A media server answers /v1/health, still loading: not up.
    let loading = Recorder::start(media_loading);
    let o = run(t, &loading.base, &["--task", "text-to-speech"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{}/v1/health answers 503", loading.base)),
        "{}",
        stderr(&o)
    );
    assert!(loading.posts().is_empty());

    let o = run(t, &up.base, &["--task", "text-to-video", "--print"]);
    assert_eq!(stdout(&o), format!("curl -sS {}/health\n", up.base));
    let o = run(t, "http://127.0.0.1:9", &["--task", "text-to-video"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("Nothing is serving at http://127.0.0.1:9"));
}

/// The demo observation of the GR00T-shaped server: GR1's groups, and a camera frame large
/// enough (200 KB) that the body cannot travel as one command-line argument.
fn demo_request() -> Value {
    json!({
        "images": {"ego_view": "A".repeat(200_000)},
        "state": {"left_arm": vec![0.0; 7], "right_arm": vec![0.1; 7], "waist": vec![0.0; 3]},
        "instruction": "pick up the apple",
    })
}

/// The routes of our GR00T server (`gr00t-server::routes`), `/predict` answering with a
/// 16-step chunk of the groups the request's state names.
fn gr00t_shaped(req: &Req) -> (u16, String) {
    let answer = match (req.method.as_str(), req.path.as_str()) {
        ("GET", "/v1/models") => json!({"object": "list", "data": [{"id": "nvidia/gr00t"}]}),
        ("GET", "/health" | "/info") => json!({"status": "ready"}),
        ("GET", "/demo") => json!({"request": demo_request(), "expected": {"actions": {}}}),
        ("GET", "/predict") => return (405, String::new()),
        ("POST", "/predict") => {
            let sent: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
            let Some(state) = sent["state"].as_object() else {
                return (
                    400,
                    json!({"error": "missing `state`", "field": "state"}).to_string(),
                );
            };
            let actions: serde_json::Map<String, Value> = state
                .iter()
                .map(|(g, v)| {
                    let width = v.as_array().map_or(0, Vec::len);
                    (format!("action.{g}"), json!(vec![vec![0.5; width]; 16]))
                })
                .collect();
            json!({"actions": actions, "action_horizon": 16, "embodiment": "gr1",
                   "seq_len": 40, "seed": sent["seed"], "timing_ms": {"total": 41.6}})
        }
        _ => return (404, json!({"error": "no such route"}).to_string()),
    };
    (200, answer.to_string())
}

#[test]
fn gr00t_gets_a_predict_probe_from_its_own_demo() {
    let tmp = TempDir::new("curl-gr00t-demo");
    let t = &tmp.0;
    let server = Recorder::start(gr00t_shaped);
    let base = server.base.clone();

    // No task named: the server has no chat route and ships a demo, so robotics.
    let o = run(t, &base, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "16-step action chunk (gr1) in 42 ms: action.left_arm ×7, action.right_arm ×7, action.waist ×3\n"
    );
    assert!(
        stderr(&o).contains("task robotics from the server's /demo"),
        "{}",
        stderr(&o)
    );
    let posts = server.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].path, "/predict");
    assert_eq!(
        posts[0].json(),
        demo_request(),
        "the demo observation as shipped"
    );

    // Named, with a prompt (the instruction) and a request field.
    let o = run(
        t,
        &base,
        &["wave hello", "--task", "robotics", "--seed", "7"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut want = demo_request();
    want["instruction"] = json!("wave hello");
    want["seed"] = json!(7);
    assert_eq!(server.posts().remove(0).json(), want);

    // The server's refusal is the error, with the field it names.
    let o = run(t, &base, &["--task", "robotics", "--state", "null"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("{base}/predict: missing `state` (field `state`)")),
        "{}",
        stderr(&o)
    );
    assert_eq!(server.posts().remove(0).json()["state"], Value::Null);

    let o = run(t, &base, &["--task", "robotics", "--print", "--seed", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!(
            "curl -sS {base}/demo \\\n  | jq -c '.request + {{\"seed\": 1}}' \\\n  | curl -sS {base}/predict -H 'Content-Type: application/json' --data-binary @-\n"
        )
    );
    assert!(server.posts().is_empty());
}

/// Every task name `--task` takes.
const TASKS: [&str; 9] = [
    "text-generation",
    "image-text-to-text",
    "text-to-image",
    "feature-extraction",
    "robotics",
    "automatic-speech-recognition",
    "text-to-speech",
    "text-to-video",
    "image-classification",
];

#[test]
fn a_task_name_must_be_one_of_the_known_ones() {
    let tmp = TempDir::new("curl-bad-task");
    // Where clap reads it, and where it lands among the request fields: the same answer.
    for args in [
        vec!["curl", "--task", "chat", "--model", "m", "--print"],
        vec!["curl", "--max-tokens", "3", "--task", "chat", "--print"],
    ] {
        let o = tt_model(&tmp.0, &[], &args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("'chat'"), "{err}");
        for task in TASKS {
            assert!(err.contains(task), "{task}: {err}");
        }
    }
    // --help names every task (clap lists them as the flag's possible values) and --tools.
    let help = stdout(&tt_model(&tmp.0, &[], &["curl", "--help"]));
    for word in ["--tools", "--task <TASK>", "possible values"]
        .iter()
        .chain(&TASKS)
    {
        assert!(help.contains(word), "{word}: {help}");
    }
}
