//! The container engine in tests: the one rule every test that needs the Docker engine follows
//! ([`engine_or_skip`]), and the images tests make and push through it.

use tt_model_engine::Client;
use tt_model_engine::torn_line_end::is_torn_line_end;

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

/// Builds `tag` as `from` plus `files` (path inside the image, bytes; mode 0644), so a test
/// gets an image whose top layer no other image has. Returns the image id.
pub async fn derive_image(
    client: &Client,
    from: &str,
    tag: &str,
    files: &[(&str, Vec<u8>)],
) -> Result<String, tt_model_engine::EngineError> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut add = |path: &str, data: &[u8]| {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_cksum();
        tar.append_data(&mut header, path, data)
            .expect("an in-memory tar takes any entry");
    };
    add(
        "Dockerfile",
        format!("FROM {from}\nCOPY files/ /\n").as_bytes(),
    );
    for (path, data) in files {
        add(&format!("files/{}", path.trim_start_matches('/')), data);
    }
    let context = bytes::Bytes::from(tar.into_inner().expect("an in-memory tar finishes"));
    let request = tt_model_engine::build::BuildRequest {
        tag: tag.to_string(),
        dockerfile: "Dockerfile".into(),
        network_mode: Some("none".into()),
        ..Default::default()
    };
    client
        .build_image(
            &request,
            futures_util::stream::once(async move { Ok(context) }),
            |_| {},
        )
        .await
}

/// Pushes `reference` (`host/repository:tag`) through the engine `client` talks to, with Basic
/// credentials, as `docker push` does: how a test puts an image into a loopback registry. The
/// error is the engine's answer. (Pushing is test support only, so it goes through bollard here
/// rather than through a `Client` method.)
pub async fn push_image(
    client: &Client,
    reference: &str,
    username: &str,
    password: &str,
) -> Result<(), String> {
    use futures_util::StreamExt;
    let docker = bollard::Docker::connect_with_host(client.host())
        .map_err(|e| format!("connecting to {}: {e}", client.host()))?
        .negotiate_version()
        .await
        .map_err(|e| format!("connecting to {}: {e}", client.host()))?;
    let target = tt_model_engine::pull::pull_target(reference);
    let credentials = bollard::auth::DockerCredentials {
        username: Some(username.to_string()),
        password: Some(password.to_string()),
        serveraddress: Some(target.host.clone()),
        ..Default::default()
    };
    let options = bollard::query_parameters::PushImageOptions {
        tag: Some(target.tag.clone()),
        ..Default::default()
    };
    let mut stream = docker.push_image(&target.from_image, Some(options), Some(credentials));
    while let Some(item) = stream.next().await {
        match item {
            Ok(_) => {}
            // Whole but for a line end (see `tt_model_engine::torn_line_end`); the tests pull
            // what they push.
            Err(e) if is_torn_line_end(&e) => break,
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                return Err(format!("pushing {reference}: {}", error.trim()));
            }
            Err(e) => return Err(format!("pushing {reference}: {e}")),
        }
    }
    Ok(())
}
