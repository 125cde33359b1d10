//! `tt-model curl [prompt] [--task T] [--tools] [--print] [--model ID] [--base-url URL]
//! [--key value …]`: the words sorted, the library's `curl` use case run
//! ([`tt_model_local::curl`]: it probes the server, chooses the task and the model and runs the
//! real `curl`), and its outcome shown: the command (`--print`), the answer as text (a
//! generated image saved where the user can open it), or curl's own exit code.

use tt_model_local::Local;
use tt_model_local::curl::{self, CurlRequest, Outcome, Task, TimedOut, task};

use crate::args::CurlArgs;
use crate::printer::Printer;
use crate::{ExitStatus, UsageError};

/// The options `curl` owns, wherever clap left them (after an unknown `--key`, clap hands the
/// rest of the line over as fields).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Words {
    pub prompt: Option<String>,
    pub print: bool,
    pub tools: bool,
    pub task: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub fields: Vec<String>,
}

/// Sort the prompt and the fields clap could not tell apart: a leading word that is not a
/// `--key` is the prompt; `--print`, `--tools`, `--task`, `--model`, `--base-url` are taken out
/// of the fields.
pub(crate) fn words(prompt: Option<String>, fields: &[String]) -> Words {
    let mut w = Words::default();
    let mut all: Vec<String> = prompt.into_iter().chain(fields.iter().cloned()).collect();
    if all.first().is_some_and(|f| !f.starts_with("--")) {
        w.prompt = Some(all.remove(0));
    }
    let mut i = 0;
    while i < all.len() {
        let t = all[i].as_str();
        let slot = match t.split_once('=').map_or(t, |(k, _)| k) {
            "--task" => Some(&mut w.task),
            "--model" => Some(&mut w.model),
            "--base-url" => Some(&mut w.base_url),
            _ => None,
        };
        match (t, slot) {
            ("--print", _) => w.print = true,
            ("--tools", _) => w.tools = true,
            (_, Some(slot)) => match t.split_once('=') {
                Some((_, v)) => *slot = Some(v.to_owned()),
                None => {
                    *slot = all.get(i + 1).cloned();
                    i += 1;
                }
            },
            _ => w.fields.push(all[i].clone()),
        }
        i += 1;
    }
    w
}

/// Runs `tt-model curl`.
pub fn run(args: &CurlArgs, printer: &Printer, local: &Local) -> anyhow::Result<ExitStatus> {
    let w = words(args.prompt.clone(), &args.fields);
    let task = match w.task.as_deref().or(args.task.as_deref()) {
        Some(name) => Some(Task::parse(name).ok_or_else(|| UsageError(task::unknown(name)))?),
        None => None,
    };
    let req = CurlRequest {
        base_url: w.base_url.as_deref().or(args.base_url.as_deref()),
        prompt: w.prompt.as_deref(),
        task,
        model: w.model.as_deref().or(args.model.as_deref()),
        tools: args.tools || w.tools,
        print: args.print || w.print,
        fields: &w.fields,
    };
    let outcome = crate::block_on(async { Ok(curl::curl(local, &req, printer).await?) })?;
    match outcome {
        // stdout: one pasteable command (what was chosen for it went to stderr).
        Outcome::Command(command) => printer.out(&command),
        Outcome::Healthy { url, status, body } => {
            if !body.is_empty() {
                printer.out(&body);
            }
            printer.done(&format!("{url} answers {status}"), None);
        }
        Outcome::Answer(answer) => {
            if let Some(image) = &answer.image {
                let path = std::env::temp_dir().join(format!(
                    "tt-model-curl-{}-{}{}",
                    std::process::id(),
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis()),
                    image.suffix
                ));
                std::fs::write(&path, &image.bytes).map_err(|e| {
                    anyhow::anyhow!("cannot write the image to {}: {e}", path.display())
                })?;
                printer.out(&format!(
                    "image: {} ({} bytes)",
                    path.display(),
                    image.bytes.len()
                ));
            }
            if !answer.text.is_empty() {
                printer.out(&answer.text);
            }
            // Shown first: an answer, even when not the one asked for.
            answer.check()?;
        }
        Outcome::Streamed => {}
        Outcome::CurlFailed(code) => return Ok(ExitStatus::Child(code)),
        Outcome::TimedOut(timed_out) => {
            printer.error(&timed_out.to_string());
            return Ok(ExitStatus::Child(TimedOut::EXIT_CODE));
        }
    }
    Ok(ExitStatus::Success)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn reserved_options_are_found_wherever_clap_left_them() {
        let w = words(
            None,
            &s(&[
                "--max-tokens",
                "8",
                "--print",
                "--model=m",
                "--base-url",
                "http://h:1",
            ]),
        );
        assert_eq!(
            w,
            Words {
                prompt: None,
                print: true,
                model: Some("m".into()),
                base_url: Some("http://h:1".into()),
                fields: s(&["--max-tokens", "8"]),
                ..Words::default()
            }
        );
        let w = words(
            Some("hi".into()),
            &s(&[
                "--seed",
                "1",
                "--task",
                "text-to-image",
                "--tools",
                "--stop=x",
            ]),
        );
        assert_eq!(
            w,
            Words {
                prompt: Some("hi".into()),
                tools: true,
                task: Some("text-to-image".into()),
                fields: s(&["--seed", "1", "--stop=x"]),
                ..Words::default()
            }
        );
        assert_eq!(
            words(None, &s(&["--task=robotics"])).task.as_deref(),
            Some("robotics")
        );
        let w = words(Some("--temperature".into()), &s(&["0.5"]));
        assert_eq!((w.prompt, w.fields), (None, s(&["--temperature", "0.5"])));
        let w = words(Some("hi".into()), &[]);
        assert_eq!(w.prompt.as_deref(), Some("hi"));
    }

    /// clap's `--task` values are the library's tasks, each of which parses back to itself.
    #[test]
    fn the_task_values_are_the_librarys_tasks() {
        for name in CurlArgs::TASKS {
            assert_eq!(Task::parse(name).map(Task::name), Some(name));
        }
        assert_eq!(Task::parse("chat"), None);
        let e = task::unknown("chat");
        for name in CurlArgs::TASKS {
            assert!(e.contains(name), "{name}: {e}");
        }
    }

    /// The picture image-text-to-text shows the model, read by an independent decoder: small,
    /// 224×224 8-bit RGB, red above blue.
    #[test]
    fn the_sample_image_is_small_and_red_over_blue() {
        use base64::Engine;
        let b64 = task::SAMPLE_IMAGE_URL
            .strip_prefix("data:image/png;base64,")
            .unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert!(bytes.len() < 4096, "{} bytes", bytes.len());
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (224, 224));
        assert_eq!(
            (info.color_type, info.bit_depth),
            (png::ColorType::Rgb, png::BitDepth::Eight)
        );
        let half = buf.len() / 2;
        assert!(buf[..half].chunks(3).all(|p| p == [0xff, 0, 0]), "top red");
        assert!(
            buf[half..].chunks(3).all(|p| p == [0, 0, 0xff]),
            "bottom blue"
        );
    }
}
