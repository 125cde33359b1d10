//! The `processor_config.json` declarations N1.6 and N1.7 share: the `processor_kwargs` block,
//! its per-embodiment modality configs, and the per-generation defaults for absent keys.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `processor_config.json` as N1.6 and N1.7 write it; `A` and `C` as in [`ProcessorKwargs`].
#[derive(Deserialize)]
#[serde(bound(deserialize = "A: Deserialize<'de>, C: ProcessorClass"))]
pub(crate) struct ProcessorFile<A, C> {
    pub(crate) processor_kwargs: ProcessorKwargs<A, C>,
}

/// The constructor defaults of a generation's processor class, for the `processor_kwargs`
/// keys an older checkpoint did not write (the only place the two generations differ).
pub(crate) struct KwargsDefaults {
    pub(crate) formalize_language: bool,
    pub(crate) use_albumentations: bool,
    /// `max_state_dim` and `max_action_dim`; `None` when the file must carry them.
    pub(crate) max_dim: Option<usize>,
    pub(crate) max_action_horizon: Option<usize>,
}

/// A processor class (`Gr00tN1d6Processor`, `Gr00tN1d7Processor`) by its defaults.
pub(crate) trait ProcessorClass {
    const DEFAULTS: KwargsDefaults;
}

/// `Gr00tN1d6Processor`.
pub(crate) struct N16Processor;

impl ProcessorClass for N16Processor {
    const DEFAULTS: KwargsDefaults = KwargsDefaults {
        formalize_language: false,
        use_albumentations: true,
        max_dim: None,
        max_action_horizon: None,
    };
}

/// The `processor_kwargs` block: `A` is how a generation reads an action config (N1.7's
/// carry a format), `C` gives its class's defaults for absent keys. `shortest_image_edge`
/// and `crop_fraction` are null when the image sizes come from `image_*_size` instead.
#[derive(Deserialize)]
#[serde(bound(deserialize = "A: Deserialize<'de>, C: ProcessorClass"))]
pub(crate) struct ProcessorKwargs<A, C> {
    pub(crate) modality_configs: BTreeMap<String, BTreeMap<String, ModalityConfig<A>>>,
    #[serde(default)]
    pub(crate) image_crop_size: Option<Vec<usize>>,
    #[serde(default)]
    pub(crate) image_target_size: Option<Vec<usize>>,
    #[serde(default = "use_albumentations::<C>")]
    pub(crate) use_albumentations: bool,
    #[serde(default = "default_edge")]
    pub(crate) shortest_image_edge: Option<usize>,
    #[serde(default = "default_crop")]
    pub(crate) crop_fraction: Option<f64>,
    #[serde(default = "formalize_language::<C>")]
    pub(crate) formalize_language: bool,
    #[serde(default = "max_dim::<C>")]
    pub(crate) max_state_dim: Option<usize>,
    #[serde(default = "max_dim::<C>")]
    pub(crate) max_action_dim: Option<usize>,
    #[serde(default = "max_action_horizon::<C>")]
    pub(crate) max_action_horizon: Option<usize>,
    #[serde(default)]
    pub(crate) use_percentiles: bool,
    #[serde(default = "yes")]
    pub(crate) clip_outliers: bool,
    #[serde(default)]
    pub(crate) apply_sincos_state_encoding: bool,
    #[serde(default)]
    pub(crate) use_relative_action: bool,
    #[serde(default)]
    pub(crate) exclude_state: bool,
    #[serde(skip)]
    class: std::marker::PhantomData<C>,
}

fn default_edge() -> Option<usize> {
    Some(256)
}
fn default_crop() -> Option<f64> {
    Some(0.95)
}
fn yes() -> bool {
    true
}
fn use_albumentations<C: ProcessorClass>() -> bool {
    C::DEFAULTS.use_albumentations
}
fn formalize_language<C: ProcessorClass>() -> bool {
    C::DEFAULTS.formalize_language
}
fn max_dim<C: ProcessorClass>() -> Option<usize> {
    C::DEFAULTS.max_dim
}
fn max_action_horizon<C: ProcessorClass>() -> Option<usize> {
    C::DEFAULTS.max_action_horizon
}

/// One modality of an embodiment in `processor_config.json`, as N1.6 and N1.7 write it; `A`
/// is how each generation reads an action config (N1.7's carry a format).
#[derive(Deserialize)]
#[serde(bound(deserialize = "A: Deserialize<'de>"))]
pub(crate) struct ModalityConfig<A = ActionConfig> {
    pub(crate) delta_indices: Vec<i64>,
    pub(crate) modality_keys: Vec<String>,
    #[serde(default)]
    pub(crate) sin_cos_embedding_keys: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) mean_std_embedding_keys: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) action_configs: Option<Vec<A>>,
}

/// One entry of an action modality's `action_configs`, as N1.6 writes it.
#[derive(Deserialize)]
pub(crate) struct ActionConfig {
    pub(super) rep: String,
    #[serde(rename = "type", default)]
    pub(super) kind: Option<String>,
    #[serde(default)]
    pub(super) state_key: Option<String>,
}
