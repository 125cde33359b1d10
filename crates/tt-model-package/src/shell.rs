//! POSIX shell quoting: how every authored value reaches a generated script. The quoter and
//! the environment-name check are the workspace's one pair, [`tt_model_manifest::shell`].

pub use tt_model_manifest::shell::{is_env_name, quote};
