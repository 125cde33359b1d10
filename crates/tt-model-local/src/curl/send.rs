//! Running the real `curl`: what `--print` shows is what runs, and a transport failure exits
//! with curl's own code. The answer is captured so the task can read it (a streamed one goes
//! straight to the terminal), and a server that never answers is given up on after the task's
//! timeout, as curl itself reports it (exit 28, "operation timed out").

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::LocalError;

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
pub async fn run(
    argv: &[String],
    stdin: Option<Vec<u8>>,
    capture: bool,
    timeout: Duration,
) -> Result<Sent, LocalError> {
    let io = |action: &'static str| {
        let program = argv[0].clone();
        move |detail| LocalError::Io {
            action,
            path: program.into(),
            detail,
        }
    };
    let mut cmd = tokio::process::Command::new(&argv[0]);
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
        })
        // A curl given up on must not outlive the command.
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(LocalError::refused(
                "curl",
                "curl is not on PATH. Re-run with --print and paste the command, or install curl.",
            ));
        }
        Err(e) => return Err(io("run")(e)),
    };
    // Both pipes on their own tasks: a large body and a large answer cannot wait on each other.
    // The writer drops the pipe when done, which is curl's end of input.
    if let (Some(body), Some(mut pipe)) = (stdin, child.stdin.take()) {
        tokio::spawn(async move {
            let _ = pipe.write_all(&body).await;
        });
    }
    let reader = child.stdout.take().map(|mut out| {
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let _ = out.read_to_end(&mut buf).await;
            buf
        })
    });
    let status = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(status) => status.map_err(io("wait for"))?,
        Err(_) => {
            let _ = child.kill().await;
            return Ok(Sent::TimedOut);
        }
    };
    let body = match reader {
        Some(r) => r.await.unwrap_or_default(),
        None => Vec::new(),
    };
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

    #[tokio::test]
    async fn stdin_goes_in_and_the_answer_comes_back() {
        let big = vec![b'x'; 300_000];
        match run(&sh("wc -c"), Some(big), true, Duration::from_secs(20))
            .await
            .unwrap()
        {
            Sent::Answered(out) => assert_eq!(String::from_utf8_lossy(&out).trim(), "300000"),
            other => panic!("{other:?}"),
        }
        match run(&sh("exit 7"), None, true, Duration::from_secs(20))
            .await
            .unwrap()
        {
            Sent::Failed(code) => assert_eq!(code, 7),
            other => panic!("{other:?}"),
        }
        match run(&sh("sleep 30"), None, true, Duration::from_millis(300))
            .await
            .unwrap()
        {
            Sent::TimedOut => {}
            other => panic!("{other:?}"),
        }
        let err = run(
            &["/nonexistent/curl".to_owned()],
            None,
            true,
            Duration::from_secs(5),
        )
        .await
        .unwrap_err();
        assert!(
            matches!(&err, LocalError::Refused { field: "curl", .. }),
            "{err}"
        );
    }
}
