//! `runtime:` is an open mapping that each kind validates itself (the original's launchers):
//! allowed keys, required keys, exactly-one-of choices, and paths that must be shipped.

use super::Checker;
use crate::decode::{Cx, FromNode, join};
use crate::diagnostic::{Diagnostic, suggest};
use crate::node::{Node, Value};
use crate::types::{COMMON_RUNTIME_KEYS, CargoBinary, Kind, RUNTIME_DEVICES};

/// The keys each kind accepts under `runtime`.
pub fn allowed_keys(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::VllmPlugin => &[
            "vllm",
            "plugin",
            "extension",
            "extra_models_dir",
            "lock",
            "overrides",
            "wheels",
        ],
        Kind::VllmFork => &["vllm", "extension", "lock", "model_dir"],
        Kind::TtDitServer => &["app", "packages", "lock", "mesh_shape_env"],
        Kind::HttpServer => &["command", "ready_line", "packages", "lock", "cargo"],
    }
}

/// Whether `runtime.<key>` is accepted for `kind`: its own keys plus the keys every kind
/// shares ([`COMMON_RUNTIME_KEYS`], which `serve` reads from the wire manifest).
pub fn accepts_key(kind: Kind, key: &str) -> bool {
    allowed_keys(kind).contains(&key) || COMMON_RUNTIME_KEYS.contains(&key)
}

/// Every key `kind` accepts under `runtime`, for messages.
fn all_keys(kind: Kind) -> Vec<&'static str> {
    let mut keys = allowed_keys(kind).to_vec();
    keys.extend_from_slice(COMMON_RUNTIME_KEYS);
    keys
}

/// The default env var a tt-dit-server reads its mesh shape from.
pub const DEFAULT_MESH_SHAPE_ENV: &str = "FLUX2_MESH_SHAPE";

pub(super) fn check(c: &mut Checker<'_>) {
    let root = c.root;
    let empty = Node {
        pos: c.pos("runtime"),
        key_pos: None,
        value: Value::Map(Vec::new()),
    };
    let node = root
        .get("runtime")
        .filter(|n| n.value != Value::Null)
        .unwrap_or(&empty);
    if node.as_map().is_none() {
        return; // decoding already reported "expected a mapping"
    }
    let kind = c.m.kind;
    let allowed = all_keys(kind);
    let mut rt = Runtime { c, node };
    for (k, _) in node.as_map().unwrap_or_default() {
        let Value::Str(key) = &k.value else { continue };
        if accepts_key(kind, key) {
            continue;
        }
        let message = match (kind, key.as_str()) {
            (Kind::VllmFork, "plugin") => "kind vllm-fork takes no runtime.plugin: the fork carries the TT plugin in-tree (use kind vllm-plugin for the standalone plugin)".to_owned(),
            (Kind::TtDitServer, _) => format!("runtime key '{key}' is not valid for kind tt-dit-server; allowed: {}", allowed.join(", ")),
            _ => format!("kind {kind} does not understand runtime.{key}; expected one of {}", allowed.join(", ")),
        };
        let mut d = Diagnostic::error("runtime-key", join("runtime", key), k.pos, message);
        if let Some(best) = suggest(key, allowed.iter().copied()) {
            d = d.with_label(format!("did you mean `{best}`?"));
        }
        rt.c.out.push(d);
    }
    rt.common();
    match kind {
        Kind::VllmPlugin => rt.vllm_plugin(),
        Kind::VllmFork => rt.vllm_fork(),
        Kind::TtDitServer => rt.dit(),
        Kind::HttpServer => rt.http(),
    }
}

struct Runtime<'c, 'a, 'n> {
    c: &'c mut Checker<'a>,
    node: &'n Node,
}

impl<'n> Runtime<'_, '_, 'n> {
    fn get(&self, key: &str) -> Option<&'n Node> {
        self.node.get(key).filter(|n| n.value != Value::Null)
    }

    fn error_at(&mut self, node: &Node, path: &str, message: impl Into<String>) -> &mut Diagnostic {
        self.c
            .out
            .push(Diagnostic::error("runtime", path, node.pos, message));
        self.c.out.last_mut().expect("just pushed")
    }

    fn missing(&mut self, path: &str, message: impl Into<String>) {
        let pos = self.node.key_pos.unwrap_or(self.node.pos);
        let pos = if self.c.root.get("runtime").is_some() {
            pos
        } else {
            self.c.pos("kind")
        };
        self.c
            .out
            .push(Diagnostic::error("runtime", path, pos, message));
    }

    /// Decodes `runtime.<key>` as `T`, recording type errors.
    fn typed<T: FromNode>(&mut self, key: &str) -> Option<T> {
        let node = self.get(key)?;
        let mut cx = Cx::new(self.c.src);
        let out = T::from_node(node, &join("runtime", key), &mut cx);
        self.c.out.extend(cx.diags);
        out
    }

    /// The keys present in `runtime.<key>` (a mapping), or a type error.
    fn sub_keys(&mut self, key: &str) -> Option<(&'n Node, Vec<&'n str>)> {
        let node = self.get(key)?;
        let Some(map) = node.as_map() else {
            self.error_at(
                node,
                &join("runtime", key),
                format!(
                    "runtime.{key} must be a mapping, found {}",
                    node.value.describe()
                ),
            );
            return None;
        };
        let keys = map
            .iter()
            .filter(|(_, v)| v.value != Value::Null)
            .filter_map(|(k, _)| match &k.value {
                Value::Str(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        Some((node, keys))
    }

    /// Reports keys of `runtime.<key>` that are neither `allowed` nor `handled` (reported by a
    /// more specific rule).
    fn unknown_sub_keys(&mut self, key: &str, allowed: &[&str], handled: &[&str]) {
        let Some(node) = self.get(key) else { return };
        for (k, _) in node.as_map().unwrap_or_default() {
            if let Value::Str(name) = &k.value
                && !allowed.contains(&name.as_str())
                && !handled.contains(&name.as_str())
            {
                let d = crate::decode::unknown_key(&join("runtime", key), name, k.pos, allowed);
                self.c.out.push(d);
            }
        }
    }

    /// `runtime.<key>` must be covered by `source.code` (equal to an entry, or under one).
    fn covered_by_code(&mut self, key: &str, consequence: &str) {
        let Some(dir) = self.typed::<String>(key) else {
            return;
        };
        let dir_norm = dir.trim_end_matches('/');
        let covered = self.c.m.source.all_code_paths().any(|p| {
            let p = p.trim_end_matches('/');
            dir_norm == p || dir_norm.starts_with(&format!("{p}/"))
        });
        if !covered {
            let node = self.get(key).expect("typed() found it");
            self.error_at(
                node,
                &join("runtime", key),
                format!("runtime.{key} '{dir}' is not covered by source.code — {consequence}"),
            )
            .help = Some(format!(
                "add '{dir}' (or a parent directory) to source.code"
            ));
        }
    }

    fn strings(&mut self, key: &str) {
        let _ = self.typed::<String>(key);
    }

    fn string_list(&mut self, key: &str) -> Vec<String> {
        self.typed::<Vec<String>>(key).unwrap_or_default()
    }

    /// The keys every kind shares: `health_path` (an absolute HTTP path) and `device`.
    fn common(&mut self) {
        if let Some(path) = self.typed::<String>("health_path")
            && (!path.starts_with('/') || path.chars().any(char::is_whitespace))
        {
            let node = self.get("health_path").expect("typed() found it");
            self.error_at(
                node,
                "runtime.health_path",
                format!(
                    "runtime.health_path '{path}' must be an absolute HTTP path such as \"/health\""
                ),
            );
        }
        if let Some(device) = self.typed::<String>("device")
            && !RUNTIME_DEVICES.contains(&device.as_str())
        {
            let node = self.get("device").expect("typed() found it");
            let label = suggest(&device, RUNTIME_DEVICES.iter().copied())
                .map(|s| format!("did you mean `{s}`?"));
            let d = self.error_at(
                node,
                "runtime.device",
                format!(
                    "runtime.device '{device}' is not one of {}",
                    RUNTIME_DEVICES.join(", ")
                ),
            );
            d.label = label;
            d.help = Some("card: the runtime needs a Tenstorrent device; none, cpu, emulation: it runs without one (serve passes no device)".into());
        }
    }

    /// `runtime.cargo`: a mapping with the keys of [`CargoBinary`], names Cargo accepts.
    fn cargo(&mut self) {
        let Some(cargo) = self.typed::<CargoBinary>("cargo") else {
            return;
        };
        let node = self.get("cargo").expect("typed() found it");
        let cargo_name = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        for (key, value) in [
            ("package", Some(cargo.package.as_str())),
            ("bin", cargo.bin.as_deref()),
        ] {
            if let Some(v) = value
                && !cargo_name(v)
            {
                let at = node.get(key).unwrap_or(node);
                self.error_at(at, &format!("runtime.cargo.{key}"), format!("runtime.cargo.{key} '{v}' is not a Cargo target name (letters, digits, '-' and '_')"));
            }
        }
        if cargo.workspace.trim().is_empty() {
            let at = node.get("workspace").unwrap_or(node);
            self.error_at(
                at,
                "runtime.cargo.workspace",
                "runtime.cargo.workspace is empty; give the directory holding Cargo.lock",
            );
        }
        let bin_path = cargo.image_path();
        if let Some(argv0) = self
            .typed::<Vec<String>>("command")
            .and_then(|a| a.into_iter().next())
            && argv0 != cargo.bin_name()
            && argv0 != bin_path
            && !matches!(argv0.as_str(), "sh" | "/bin/sh")
        {
            let at = self.get("command").expect("typed() found it");
            let pos = at.key_pos.unwrap_or(at.pos);
            self.c.out.push(
                Diagnostic::warning("cargo-command", "runtime.command", pos, format!("runtime.command runs '{argv0}', not the binary runtime.cargo ships ({bin_path})"))
                    .with_help(format!("start the server with \"{}\"", cargo.bin_name())),
            );
        }
    }

    fn vllm_plugin(&mut self) {
        // runtime.vllm: exactly one of version / wheel / path.
        match self.sub_keys("vllm") {
            None if self.get("vllm").is_none() => self.missing(
                "runtime.vllm",
                "kind vllm-plugin requires runtime.vllm: give exactly one of {version: \"0.x.y\"} (built from the sdist with VLLM_TARGET_DEVICE=empty), {wheel: path-or-glob} (a vllm-*.whl) or {path: a local vLLM source tree}",
            ),
            None => {}
            Some((node, keys)) => {
                if keys.contains(&"repo") {
                    self.error_at(node, "runtime.vllm.repo", "runtime.vllm.repo describes the tenstorrent/vllm fork — that is kind vllm-fork, not vllm-plugin. Use kind: vllm-fork, or give runtime.vllm.version / wheel / path");
                }
                self.unknown_sub_keys("vllm", &["version", "wheel", "path"], &["repo", "ref"]);
                let given: Vec<&str> = keys.iter().copied().filter(|k| matches!(*k, "version" | "wheel" | "path")).collect();
                if given.is_empty() && !keys.contains(&"repo") {
                    self.error_at(node, "runtime.vllm", "runtime.vllm: give exactly one of version / wheel / path, got none");
                } else if given.len() > 1 {
                    self.error_at(node, "runtime.vllm", format!("runtime.vllm: give exactly one of version / wheel / path, got {}", given.join(", ")));
                }
                for k in given {
                    let sub = node.get(k).expect("listed");
                    let mut cx = Cx::new(self.c.src);
                    let value = String::from_node(sub, &format!("runtime.vllm.{k}"), &mut cx);
                    self.c.out.extend(cx.diags);
                    if k == "wheel"
                        && let Some(w) = value
                    {
                        let file = w.rsplit('/').next().unwrap_or(&w);
                        if !(file.starts_with("vllm-") && file.ends_with(".whl")) {
                            self.error_at(sub, "runtime.vllm.wheel", format!("runtime.vllm.wheel '{w}' must name a vllm-*.whl"));
                        }
                    }
                }
            }
        }
        // runtime.plugin: exactly one of {path}, {repo, ref}, {version}.
        match self.sub_keys("plugin") {
            None if self.get("plugin").is_none() => self.missing(
                "runtime.plugin",
                "kind vllm-plugin requires runtime.plugin: {path: your vllm-tt-plugin checkout} (staged as-is), {repo, ref} (cloned at build; the ref must be pushed) or {version} (from PyPI)",
            ),
            None => {}
            Some((node, keys)) => {
                self.unknown_sub_keys("plugin", &["path", "repo", "ref", "version"], &[]);
                let path = keys.contains(&"path");
                let git = keys.contains(&"repo") || keys.contains(&"ref");
                let version = keys.contains(&"version");
                let count = [path, git, version].iter().filter(|b| **b).count();
                if count == 0 {
                    self.error_at(node, "runtime.plugin", "runtime.plugin: give exactly one of path / {repo, ref} / version, got none");
                } else if count > 1 {
                    let got: Vec<&str> = keys.iter().copied().filter(|k| matches!(*k, "path" | "repo" | "ref" | "version")).collect();
                    self.error_at(node, "runtime.plugin", format!("runtime.plugin: give exactly one of path / {{repo, ref}} / version, got {}", got.join(", ")));
                } else if git && !(keys.contains(&"repo") && keys.contains(&"ref")) {
                    self.error_at(node, "runtime.plugin", "runtime.plugin: a git plugin needs both repo and ref");
                }
                for k in keys.iter().filter(|k| matches!(**k, "path" | "repo" | "ref" | "version")) {
                    let sub = node.get(k).expect("listed");
                    let mut cx = Cx::new(self.c.src);
                    let _ = String::from_node(sub, &format!("runtime.plugin.{k}"), &mut cx);
                    self.c.out.extend(cx.diags);
                }
            }
        }
        if self.get("extra_models_dir").is_some() {
            self.covered_by_code(
                "extra_models_dir",
                "the plugin would scan a directory that never entered the image",
            );
        }
        self.strings("extension");
        self.strings("lock");
        self.string_list("overrides");
        let wheels = self.string_list("wheels");
        for (i, w) in wheels.iter().enumerate() {
            let file = w.rsplit('/').next().unwrap_or(w);
            if file.starts_with("vllm-") {
                let node = self.get("wheels").and_then(|n| match &n.value {
                    Value::Seq(items) => items.get(i),
                    _ => None,
                });
                if let Some(node) = node {
                    self.error_at(
                        node,
                        &format!("runtime.wheels[{i}]"),
                        format!(
                            "runtime.wheels may not carry vLLM ('{w}'); use runtime.vllm.wheel"
                        ),
                    );
                }
            }
        }
    }

    fn vllm_fork(&mut self) {
        match self.sub_keys("vllm") {
            None if self.get("vllm").is_none() => self.missing(
                "runtime.vllm",
                "kind vllm-fork requires runtime.vllm.{repo, ref} — the tenstorrent/vllm fork to clone at build time",
            ),
            None => {}
            Some((node, keys)) => {
                self.unknown_sub_keys("vllm", &["repo", "ref"], &["version"]);
                let has = |k: &str| keys.contains(&k);
                if has("version") && !has("repo") {
                    self.error_at(node, "runtime.vllm.version", "runtime.vllm.version describes stock vLLM from PyPI — that is kind vllm-plugin, not vllm-fork. Give runtime.vllm.{repo, ref} of the fork");
                } else if !(has("repo") && has("ref")) {
                    self.error_at(node, "runtime.vllm", "kind vllm-fork requires runtime.vllm.{repo, ref} — the tenstorrent/vllm fork to clone at build time");
                }
                for k in ["repo", "ref"] {
                    if let Some(sub) = node.get(k) {
                        let mut cx = Cx::new(self.c.src);
                        let _ = String::from_node(sub, &format!("runtime.vllm.{k}"), &mut cx);
                        self.c.out.extend(cx.diags);
                    }
                }
            }
        }
        if self.get("model_dir").is_none() {
            self.missing("runtime.model_dir", "kind vllm-fork requires runtime.model_dir: the model's directory inside the tt-metal tree (covered by source.code)");
        } else {
            self.covered_by_code(
                "model_dir",
                "the launcher would not find the model inside the image",
            );
        }
        self.strings("extension");
        self.strings("lock");
    }

    fn dit(&mut self) {
        match self.typed::<String>("app") {
            None if self.get("app").is_none() => self.missing(
                "runtime.app",
                "kind tt-dit-server requires runtime.app, the ASGI target to serve, as \"module.path:attribute\" — e.g. \"models.my_model.server:app\"",
            ),
            Some(app) if !is_app_target(&app) => {
                let node = self.get("app").expect("typed() found it");
                self.error_at(node, "runtime.app", format!("runtime.app '{app}' must look like \"module.path:attribute\" — e.g. \"models.my_model.server:app\""));
            }
            _ => {}
        }
        self.string_list("packages");
        self.strings("lock");
        if let Some(env) = self.typed::<String>("mesh_shape_env")
            && !is_env_name(&env)
        {
            let node = self.get("mesh_shape_env").expect("typed() found it");
            self.error_at(node, "runtime.mesh_shape_env", format!("runtime.mesh_shape_env '{env}' is not a valid environment variable name — letters, digits and '_', not starting with a digit"));
        }
    }

    fn http(&mut self) {
        match self.get("command") {
            None => self.missing(
                "runtime.command",
                "kind http-server requires runtime.command: the server's argv, e.g. [\"my-server\", \"--host\", \"{host}\", \"--port\", \"{port}\"]",
            ),
            Some(node) => {
                let argv = self.typed::<Vec<String>>("command");
                if let Some(argv) = argv {
                    if argv.is_empty() {
                        self.error_at(node, "runtime.command", "runtime.command is empty; give the server's argv");
                    }
                    let mut has_port = false;
                    for (i, arg) in argv.iter().enumerate() {
                        for placeholder in placeholders(arg) {
                            if placeholder == "port" {
                                has_port = true;
                            } else if placeholder != "host" {
                                let item = match &node.value {
                                    Value::Seq(items) => items.get(i).unwrap_or(node),
                                    _ => node,
                                };
                                let label = suggest(&placeholder, ["host", "port"]).map(|s| format!("did you mean `{{{s}}}`?"));
                                let d = self.error_at(item, &format!("runtime.command[{i}]"), format!("unknown placeholder `{{{placeholder}}}` in runtime.command; only {{host}} and {{port}} are filled in"));
                                d.label = label;
                            }
                        }
                    }
                    if !has_port && !argv.is_empty() {
                        let pos = node.key_pos.unwrap_or(node.pos);
                        self.c.out.push(
                            Diagnostic::warning("http-port", "runtime.command", pos, "runtime.command has no `{port}` placeholder, so `tt-model serve --port` cannot move the server's port")
                                .with_help("pass the port to the server, e.g. \"--port\", \"{port}\""),
                        );
                    }
                }
            }
        }
        if let Some(line) = self.typed::<String>("ready_line")
            && line.trim().is_empty()
        {
            let node = self.get("ready_line").expect("typed() found it");
            self.error_at(node, "runtime.ready_line", "runtime.ready_line is empty; give a substring of the log line the server prints when ready");
        }
        self.string_list("packages");
        self.strings("lock");
        self.cargo();
    }
}

/// `module.path:attribute`.
pub(crate) fn is_app_target(app: &str) -> bool {
    let Some((module, attr)) = app.split_once(':') else {
        return false;
    };
    let ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    module.split('.').all(ident) && attr.split('.').all(ident)
}

/// A POSIX environment variable name (the check the package's scripts rely on too).
pub(crate) use crate::shell::is_env_name;

/// The `{name}` placeholders in `arg` (`{{`/`}}` are literal braces).
fn placeholders(arg: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = arg.replace("{{", "").replace("}}", "");
    while let Some(start) = rest.find('{') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('}') else { break };
        out.push(after[..end].to_owned());
        rest = after[end + 1..].to_owned();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn app_targets_and_env_names() {
        assert!(is_app_target("gr00t_p150.server.app:app"));
        assert!(!is_app_target("gr00t_p150.server.app"));
        assert!(!is_app_target("a-b:app"));
        assert!(is_env_name("TT_MESH_SHAPE"));
        assert!(!is_env_name("1X"));
        assert_eq!(
            placeholders("--port={port} {{x}} {hots}"),
            vec!["port", "hots"]
        );
    }
}
