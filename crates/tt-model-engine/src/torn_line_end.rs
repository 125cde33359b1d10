//! A JSON-lines answer whose last `\r\n` came in a read of its own.
//!
//! dockerd ends each progress message (build, pull, import, load, wait) with a line end, and
//! nothing keeps a message and its line end in one read of the socket. bollard 0.21's decoder
//! parses a message as soon as it is whole, so a line end read alone is left over: `\n` is
//! consumed, but the `\r` stays in the buffer, and when the body ends there the decoder reports
//! `IOError("bytes remaining on stream")` although every message was read (seen once in CI,
//! on 2 busy cores, after "Successfully tagged …"). A body cut inside a message ends the same
//! way, so the error alone cannot tell the two apart: each caller asks the engine whether the
//! work is done (the image is there, the exit code came) and only then lets it pass.
//! `tests/torn_line_end.rs` replays both answers from a fake engine.

/// Whether `error` is the decoder's "bytes remaining on stream" at the end of an answer. Public
/// for the callers that stream an engine answer through bollard themselves (the test kit's
/// image push), which must let it pass the same way.
pub fn is_torn_line_end(error: &crate::error::Cause) -> bool {
    matches!(
        error,
        bollard::errors::Error::IOError { err }
            if err.kind() == std::io::ErrorKind::Other
                && err.to_string() == "bytes remaining on stream"
    )
}

#[cfg(test)]
mod tests {
    use super::is_torn_line_end;

    #[test]
    fn only_the_decoders_leftover_bytes_count() {
        let io = |kind, text: &str| bollard::errors::Error::IOError {
            err: std::io::Error::new(kind, text.to_string()),
        };
        assert!(is_torn_line_end(&io(
            std::io::ErrorKind::Other,
            "bytes remaining on stream"
        )));
        assert!(!is_torn_line_end(&io(
            std::io::ErrorKind::ConnectionReset,
            "bytes remaining on stream"
        )));
        assert!(!is_torn_line_end(&io(
            std::io::ErrorKind::Other,
            "connection closed"
        )));
        assert!(!is_torn_line_end(
            &bollard::errors::Error::DockerStreamError {
                error: "bytes remaining on stream".into()
            }
        ));
    }
}
