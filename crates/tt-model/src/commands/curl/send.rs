//! Running the real `curl`: what `--print` shows is what runs, and a transport failure exits
//! with curl's own code. The answer is captured so the task can read it (a streamed one goes
//! straight to the terminal), and a server that never answers is given up on after the task's
//! timeout, as curl itself reports it (exit 28, "operation timed out").

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::UserError;

/// curl's exit code for a timed-out transfer.
pub const TIMED_OUT: u8 = 28;

/// How curl ended.
#[derive(Debug)]
pub enum Sent {
    /// curl exited 0: the body it wrote (empty when it went to the terminal).
    Answered(Vec<u8>),
    /// curl exited non-zero (128 + the signal when one killed it), having said why on stderr.
    Failed(u8),
    /// No answer within the timeout; curl was stopped.
    TimedOut,
}

/// Runs `argv` (`curl …`) with `stdin` as its standard input (for `-d @-`), the answer
/// captured unless `capture` is false, for at most `timeout`.
pub fn run(
    argv: &[String],
    stdin: Option<Vec<u8>>,
    capture: bool,
    timeout: Duration,
) -> anyhow::Result<Sent> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(if capture {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(UserError(
                "curl is not on PATH. Re-run with --print and paste the command, or install curl."
                    .into(),
            )
            .into());
        }
        Err(e) => return Err(anyhow::anyhow!("cannot run curl: {e}")),
    };
    // Both pipes on their own threads: a large body and a large answer cannot wait on each other.
    if let (Some(body), Some(mut pipe)) = (stdin, child.stdin.take()) {
        std::thread::spawn(move || {
            let _ = pipe.write_all(&body);
        });
    }
    let reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = out.read_to_end(&mut buf);
            buf
        })
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(Sent::TimedOut);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let body = reader
        .map(|r| r.join().unwrap_or_default())
        .unwrap_or_default();
    let code = status.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + status.signal().unwrap_or(0)
    });
    Ok(match code {
        0 => Sent::Answered(body),
        c => Sent::Failed(u8::try_from(c).unwrap_or(1)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        ["sh", "-c", script].map(str::to_owned).to_vec()
    }

    #[test]
    fn stdin_goes_in_and_the_answer_comes_back() {
        let big = vec![b'x'; 300_000];
        match run(&sh("wc -c"), Some(big), true, Duration::from_secs(20)).unwrap() {
            Sent::Answered(out) => assert_eq!(String::from_utf8_lossy(&out).trim(), "300000"),
            other => panic!("{other:?}"),
        }
        match run(&sh("exit 7"), None, true, Duration::from_secs(20)).unwrap() {
            Sent::Failed(code) => assert_eq!(code, 7),
            other => panic!("{other:?}"),
        }
        let started = Instant::now();
        match run(&sh("sleep 30"), None, true, Duration::from_millis(300)).unwrap() {
            Sent::TimedOut => assert!(started.elapsed() < Duration::from_secs(10)),
            other => panic!("{other:?}"),
        }
    }
}
