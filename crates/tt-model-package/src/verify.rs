//! Reading `verify.sh`'s markers back into a result: which check failed, with what output.

use crate::error::PackageError;
use crate::spec::VerifyStep;

/// The marker prefix `verify.sh` prints.
const MARK: &str = "tt-model-verify: ";

/// Turns a verify run (exit status and combined output) into `Ok(passed count)` or the
/// failing check with the lines it printed.
pub fn interpret(checks: &[VerifyStep], status: i64, output: &str) -> Result<usize, PackageError> {
    let mut current: Option<usize> = None;
    let mut lines: Vec<&str> = Vec::new();
    for line in output.lines() {
        let Some(rest) = line.strip_prefix(MARK) else {
            if current.is_some() {
                lines.push(line);
            }
            continue;
        };
        let mut words = rest.split_whitespace();
        match (
            words.next(),
            words.next().and_then(|n| n.parse::<usize>().ok()),
        ) {
            (Some("begin"), Some(n)) => {
                current = Some(n);
                lines.clear();
            }
            (Some("ok"), Some(_)) => current = None,
            (Some("fail"), Some(n)) => {
                let code = words.next().and_then(|c| c.parse().ok()).unwrap_or(status);
                let check = checks
                    .get(n.wrapping_sub(1))
                    .map(|c| c.text().to_string())
                    .unwrap_or_default();
                return Err(PackageError::Verify {
                    index: n,
                    check,
                    status: code,
                    output: lines.join("\n"),
                });
            }
            (Some("passed"), Some(n)) if status == 0 && n == checks.len() => return Ok(n),
            _ => {}
        }
    }
    Err(PackageError::VerifyIncomplete {
        status,
        output: output.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checks() -> Vec<VerifyStep> {
        vec![
            VerifyStep::sh("true"),
            VerifyStep::Python("assert 1 == 2, 'nope'".into()),
        ]
    }

    #[test]
    fn all_passed() {
        let out = "tt-model-verify: begin 1\ntt-model-verify: ok 1\ntt-model-verify: begin 2\nhi\ntt-model-verify: ok 2\ntt-model-verify: passed 2\n";
        assert_eq!(interpret(&checks(), 0, out).unwrap(), 2);
    }

    #[test]
    fn failure_names_the_check_and_its_output() {
        let out = "tt-model-verify: begin 1\ntt-model-verify: ok 1\ntt-model-verify: begin 2\nTraceback\nAssertionError: nope\ntt-model-verify: fail 2 1\n";
        match interpret(&checks(), 1, out).unwrap_err() {
            PackageError::Verify {
                index,
                check,
                status,
                output,
            } => {
                assert_eq!(index, 2);
                assert_eq!(check, "assert 1 == 2, 'nope'");
                assert_eq!(status, 1);
                assert_eq!(output, "Traceback\nAssertionError: nope");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_script_that_never_ran_is_incomplete() {
        let err = interpret(&checks(), 127, "sh: verify.sh: not found\n").unwrap_err();
        assert!(
            matches!(err, PackageError::VerifyIncomplete { status: 127, .. }),
            "{err:?}"
        );
        // A passed line with the wrong count is not a pass.
        let err = interpret(&checks(), 0, "tt-model-verify: passed 1\n").unwrap_err();
        assert!(matches!(err, PackageError::VerifyIncomplete { .. }));
    }
}
