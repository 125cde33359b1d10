//! `tt-model publish` / `unpublish` arguments.

use clap::Args;

/// List a pushed package in the community catalog (makes a private repo public).
///
/// Refused while its model card lacks `performance` or `limitations`, and whenever the published
/// manifest cannot be read (nothing is made public then).
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// `org/name`.
    #[arg(value_name = "ID")]
    pub id: String,
}

/// Remove a package from the community catalog (its visibility is left as it is).
#[derive(Debug, Args)]
pub struct UnpublishArgs {
    /// `org/name`.
    #[arg(value_name = "ID")]
    pub id: String,
}
