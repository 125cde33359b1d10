//! Test support (feature `testing`, enabled only by test builds): the one rule every test that
//! needs the Docker engine follows.

use crate::Client;

/// The engine, or `None` when none is reachable: the test then passes with a `SKIPPED` line,
/// unless `TT_MODEL_REQUIRE_DOCKER` is set (CI sets it), which makes a missing engine a failure.
pub async fn engine_or_skip() -> Option<Client> {
    match Client::connect().await {
        Ok(c) => Some(c),
        Err(e) => {
            if std::env::var_os("TT_MODEL_REQUIRE_DOCKER").is_some() {
                panic!("TT_MODEL_REQUIRE_DOCKER is set but the engine is unreachable: {e}");
            }
            #[allow(clippy::print_stderr)] // the skip must be visible in the test output
            {
                eprintln!(
                    "SKIPPED: no container engine reachable ({e}); set TT_MODEL_REQUIRE_DOCKER=1 to fail instead"
                );
            }
            None
        }
    }
}
