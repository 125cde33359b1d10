//! The package issue's example end to end: `package` examples/minimal-http on the busybox base,
//! then `serve --device none` with its pinned weights from the local Hub-protocol server,
//! ready by both signals, GET /health, stop, and the container is gone.

use crate::common;

use common::*;
use tt_model_testkit::hub::HubServer;

#[tokio::test(flavor = "multi_thread")]
async fn minimal_http_example_packages_serves_and_stops() {
    let Some(client) = engine().await else { return };
    make_base_images();
    let tmp = TempDir::new("serve-example");
    let t = tmp.0.clone();
    let weights = example_weights_repo();
    let server = HubServer::start(vec![weights]).await.unwrap();
    let endpoint = server.endpoint();
    let env = [("HF_ENDPOINT", endpoint.as_str())];
    let run = |args: &[&str]| tokio::task::block_in_place(|| tt_model(&t, &env, args));
    let hub = t.join("hub");
    // The example as written, its tt-metal path made absolute (relative paths are read from
    // the working directory, as the original tool does).
    let staged = tokio::task::block_in_place(|| package_example(&t, &env, "minimal-http"));
    let manifest = staged.join("tt_kernel_manifest.json");
    let m = manifest.to_str().unwrap().to_string();
    let container = "tt-model-minimal-http-default";
    let _ = client.remove_container_force(container).await;
    let port = free_port();

    let serve = run(&["-v", "serve", &m, "--device", "none", "--port", &port]);
    let text = String::from_utf8_lossy(&serve.stderr).to_string();
    assert!(serve.status.success(), "{text}");
    assert!(
        text.contains("ready by ready line + health endpoint"),
        "{text}"
    );
    assert!(
        text.contains("weights acme/minimal-http-weights@01234567"),
        "{text}"
    );
    let snap = hub.join(
        "models--acme--minimal-http-weights/snapshots/0123456789abcdef0123456789abcdef01234567",
    );
    assert!(snap.join("model.safetensors").is_file());

    let body = health(&port);
    assert!(body.contains(" 200 "), "{body}");

    let stop = run(&["stop", &m]);
    assert!(String::from_utf8_lossy(&stop.stderr).contains("clean shutdown"));
    assert!(
        client.container(container).await.unwrap().is_none(),
        "the container was removed"
    );
}
