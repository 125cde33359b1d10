//! The containers this machine runs for a package, as the engine lists them by our labels.

use tt_model_engine::Client;
use tt_model_engine::containers::{ContainerInfo, RESET_PACKAGE};
use tt_model_oci::labels;

use crate::{LocalError, host};

/// The containers of `package` (only `profile`'s when given; stopped ones too when `all`),
/// running ones first, then by name.
pub async fn of_package(
    client: &Client,
    package: &str,
    profile: Option<&str>,
    all: bool,
) -> Result<Vec<ContainerInfo>, LocalError> {
    let mut v: Vec<ContainerInfo> = client
        .tt_model_containers(Some(package), all)
        .await?
        .into_iter()
        // Exact label match: the list filter already is exact, the name check guards against
        // containers that were renamed.
        .filter(|c| c.label(labels::PACKAGE) == Some(package))
        .filter(|c| profile.is_none_or(|p| c.label(labels::PROFILE) == Some(p)))
        .collect();
    v.sort_by_key(|c| (!c.running, c.name.clone()));
    Ok(v)
}

/// Every tt-model container on this machine (stopped ones too when `all`), as the engine
/// lists them, without the short-lived chip-reset containers `stop` runs.
pub async fn listing(all: bool) -> Result<Vec<ContainerInfo>, LocalError> {
    let client = host::engine().await?;
    Ok(client
        .tt_model_containers(None, all)
        .await?
        .into_iter()
        .filter(|c| c.label(labels::PACKAGE) != Some(RESET_PACKAGE))
        .collect())
}
