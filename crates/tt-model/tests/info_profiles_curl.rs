//! `info`, `profiles`, `curl` and `version` as `tt` drives them, without an engine: `info`
//! against the Hub-protocol test server, read back the way tt's `inspect` reads it (one JSON
//! object, then the verdict text); `profiles` on a staged package; `curl` through the real
//! `curl` against small loopback HTTP servers (one with the OpenAI shape, one shaped like our
//! GR00T server, which has no chat route).

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use common::*;
use serde_json::{Value, json};
use tt_model_testkit::hub::{FakeFile, FakeRepo, HubServer};

fn manifest() -> Value {
    json!({
        "schema_version": "5.1", "name": "demo", "tt_metal_version": "v0.60.0",
        "arch": "blackhole", "device_count": 1,
        "weights": {"repo_id": "acme/demo-weights", "revision": "main"},
        "container": {
            "image": {"registry": "hf", "repository": "demo", "tag": "tt-model/demo:abc"},
            "kind": "http-server",
            "runtime": {"command": ["/serve", "{port}"], "health_path": "/health"},
            "serve": {"hardware": "p150", "mesh_device": "P150"},
            "serve_profiles": [
                {"name": "default"},
                {"name": "quad", "hardware": "p150x4", "mesh_device": "P150x4",
                 "description": "four cards"}],
            "default_profile": "default"
        }
    })
}

/// What tt's `inspect` does with `tt-model info` stdout: the first JSON value, the rest stripped.
fn inspect(stdout: &str) -> (Value, String) {
    let text = stdout.trim();
    assert!(text.starts_with('{'), "tt needs the JSON first: {text}");
    let mut it = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    let v = it.next().unwrap().unwrap();
    let rest = text[it.byte_offset()..].trim().to_string();
    (v, rest)
}

#[tokio::test(flavor = "multi_thread")]
async fn info_prints_the_manifest_then_the_verdict() {
    let body = manifest().to_string();
    let repo = FakeRepo::new(
        "acme/demo",
        vec![FakeFile::regular("tt_kernel_manifest.json", body.clone())],
    );
    let server = HubServer::start(vec![repo]).await.unwrap();
    let tmp = TempDir::new("info-verdict");
    let t = tmp.0.clone();
    let env = [
        ("HF_ENDPOINT", server.endpoint()),
        ("ARCH_NAME", String::new()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let run = |args: &[&str]| tokio::task::block_in_place(|| tt_model(&t, &env, args));

    let same = run(&["info", "acme/demo", "--arch", "p150"]);
    assert!(same.status.success(), "{}", stderr(&same));
    let wire = tt_model_manifest::WireManifest::from_json(&body).unwrap();
    assert_eq!(
        stdout(&same),
        format!(
            "{}\n✓ compatible with the local environment\n",
            wire.to_json()
        ),
        "the manifest as the wire form, an empty line, the verdict"
    );
    let (m, verdict) = inspect(&stdout(&same));
    assert_eq!(m["name"], "demo");
    assert_eq!(m["arch"], "blackhole");
    assert_eq!(m["container"]["kind"], "http-server");
    assert_eq!(verdict, "✓ compatible with the local environment");

    let other = run(&["info", "acme/demo", "--arch", "wormhole_b0"]);
    assert!(other.status.success(), "a verdict is not a failure");
    let (_, verdict) = inspect(&stdout(&other));
    assert_eq!(
        verdict,
        "! compatibility issues\n    [FATAL] arch: bundle='blackhole' local='wormhole_b0'"
    );

    // This machine: whatever its card says, the verdict is text after the JSON.
    let here = run(&["info", "acme/demo"]);
    let (_, verdict) = inspect(&stdout(&here));
    assert!(
        verdict.starts_with('✓') || verdict.starts_with('○') || verdict.starts_with('!'),
        "{verdict}"
    );

    let j = json_of(&run(&["info", "acme/demo", "--json", "--arch", "n300"]));
    assert_eq!(j["kind"], "http-server");
    assert_eq!(j["compatibility"]["compatible"], false);
    assert_eq!(j["compatibility"]["issues"][0]["field"], "arch");
    assert_eq!(j["compatibility"]["local"]["source"], "flag");

    let missing = run(&["info", "acme/nope"]);
    assert_eq!(missing.status.code(), Some(1), "{}", stderr(&missing));
    assert!(stdout(&missing).is_empty(), "nothing for tt to parse");
}

fn json_of(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn profiles_lists_each_with_the_default_marked() {
    let tmp = TempDir::new("profiles");
    let dir = tmp.0.join("out/demo");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("tt_kernel_manifest.json"), manifest().to_string()).unwrap();
    let o = tt_model(&tmp.0, &[], &["profiles", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "  • default (default)  p150 · P150      seqs - · len -\n  • quad               p150x4 · P150x4  seqs - · len -  four cards\n"
    );
    let j = json_of(&tt_model(
        &tmp.0,
        &[],
        &["profiles", dir.to_str().unwrap(), "--json"],
    ));
    assert_eq!(j[0]["name"], "default");
    assert_eq!(j[0]["default"], true);
    assert_eq!(j[1]["chips"], 4);
    let missing = tt_model(&tmp.0, &[], &["profiles", "acme/not-pulled"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("is not a pulled container package"),
        "{}",
        stderr(&missing)
    );
}

/// One request: method, path, body.
type Req = (String, String, String);
/// Status, extra headers, body; `None` closes the connection without an answer.
type Answer = Option<(u16, &'static str, String)>;

/// A loopback HTTP/1.1 server answering with `route`, on its own thread; returns its root URL.
fn http_server(route: fn(&Req) -> Answer) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
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
            let mut length = 0;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = r.read_exact(&mut body);
            let req = (method, path, String::from_utf8_lossy(&body).into_owned());
            let Some((status, headers, body)) = route(&req) else {
                continue;
            };
            let mut s = stream;
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{headers}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://127.0.0.1:{port}")
}

fn openai(req: &Req) -> Answer {
    match (req.0.as_str(), req.1.as_str()) {
        ("GET", "/v1/models") => Some((
            200,
            "",
            json!({"object": "list", "data": [{"id": "acme/chat-weights"}]}).to_string(),
        )),
        ("GET", "/v1/chat/completions") => Some((405, "allow: POST\r\n", "{}".into())),
        ("POST", "/v1/chat/completions") => {
            let sent: Value = serde_json::from_str(&req.2).unwrap_or(Value::Null);
            if sent["messages"][0]["content"] == "hang up" {
                return None;
            }
            // The answer is the request itself: `curl` prints an answer's text.
            Some((
                200,
                "",
                json!({"choices": [{"message": {"content": sent.to_string()}}]}).to_string(),
            ))
        }
        _ => Some((404, "", "{}".into())),
    }
}

/// The routes of our GR00T server (`gr00t-server::routes`), with no chat route.
fn gr00t_shaped(req: &Req) -> Answer {
    match (req.0.as_str(), req.1.as_str()) {
        ("GET", "/v1/models") => Some((
            200,
            "",
            json!({"object": "list", "data": [{"id": "nvidia/gr00t"}]}).to_string(),
        )),
        ("GET", "/health" | "/info" | "/demo") => Some((200, "", "{}".into())),
        ("GET", "/predict") => Some((405, "allow: POST\r\n", String::new())),
        _ => Some((404, "", json!({"error": "no such route"}).to_string())),
    }
}

#[test]
fn curl_sends_one_chat_completion_through_curl() {
    let tmp = TempDir::new("curl-chat");
    let t = &tmp.0;
    let base = http_server(openai);
    let o = tt_model(
        t,
        &[],
        &[
            "curl",
            "Say hi",
            "--base-url",
            &base,
            "--max-tokens",
            "8",
            "--temperature=0.5",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let sent: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        sent["model"], "acme/chat-weights",
        "the id the server lists"
    );
    assert_eq!(sent["messages"][0]["content"], "Say hi");
    assert_eq!(sent["max_tokens"], 8);
    assert_eq!(sent["temperature"], 0.5);

    // tt's order: no prompt, --base-url first, the fields after it.
    let o = tt_model(
        t,
        &[("TT_MODEL_BASE_URL", &base)],
        &["curl", "--stream", "--print"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        format!(
            "curl -sS {base}/v1/chat/completions \\\n  -H 'Content-Type: application/json' \\\n  -d '{{\"model\": \"acme/chat-weights\", \"messages\": [{{\"role\": \"user\", \"content\": \"Say hello in one sentence.\"}}], \"max_tokens\": 64, \"stream\": true}}'\n"
        )
    );
    assert!(
        stderr(&o).contains("○ model id from the running server: acme/chat-weights"),
        "{}",
        stderr(&o)
    );

    // curl's own exit code: 52, an empty reply.
    let o = tt_model(t, &[], &["curl", "hang up", "--base-url", &base]);
    assert_eq!(o.status.code(), Some(52), "{}", stderr(&o));
}

#[test]
fn curl_refuses_a_server_without_a_chat_api_naming_its_routes() {
    let tmp = TempDir::new("curl-gr00t");
    let base = http_server(gr00t_shaped);
    let o = tt_model(&tmp.0, &[], &["curl", "--base-url", &base]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("has no chat completions route"), "{err}");
    for route in [
        "GET /health",
        "GET /info",
        "POST /predict",
        "GET /v1/models",
    ] {
        assert!(err.contains(route), "{route}: {err}");
    }
    assert!(err.contains(&format!("curl {base}/health")), "{err}");
    assert!(stdout(&o).is_empty());

    let nothing = tt_model(&tmp.0, &[], &["curl", "--base-url", "http://127.0.0.1:9"]);
    assert_eq!(nothing.status.code(), Some(1));
    assert!(stderr(&nothing).contains("Can't tell which model to ask for"));
}

#[test]
fn version_is_bare() {
    let tmp = TempDir::new("version");
    let v = tt_model(&tmp.0, &[], &["version"]);
    let flag = tt_model(&tmp.0, &[], &["--version"]);
    assert!(v.status.success());
    assert_eq!(stdout(&v), stdout(&flag));
    let text = stdout(&v);
    let parts: Vec<&str> = text.trim().split('.').collect();
    assert_eq!(parts.len(), 3, "{text}");
    assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()), "{text}");
}
