//! What a use case says as it goes, for the CLI to draw: one vocabulary for every use case of
//! this crate, so the terminal printer and the NDJSON stream tt reads render each kind of
//! report one way, wherever it came from. The steps' keys are the ones the stream shares with
//! tt (`host`, `bundle`, `image`, `weights`, `container`).

/// One report of a use case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Step `key` starts (`label`: what it does, shown with `-v`).
    StepStart {
        /// The step's key.
        key: String,
        /// What the step does.
        label: String,
    },
    /// Step `key` finished (`✓ what  detail`).
    StepDone {
        /// The step's key.
        key: String,
        /// What was done.
        what: String,
        /// A short fact about it, if any.
        detail: Option<String>,
    },
    /// Step `key` finished, its line already told by an earlier event: the stream settles it.
    StepEnd {
        /// The step's key.
        key: String,
        /// A short fact about it, if any.
        detail: Option<String>,
    },
    /// Something was done outside a step (`✓ what  detail`).
    Done {
        /// What was done, in the user's terms.
        what: String,
        /// A short fact about it (a size, a path), if any.
        detail: Option<String>,
    },
    /// Nothing was done, on purpose: already so, or kept as asked (`○ what  detail`).
    Skipped {
        /// What was not done.
        what: String,
        /// Why, or what would do it.
        detail: Option<String>,
    },
    /// A fact worth telling on the way (`• text`).
    Note(String),
    /// The use case went on, but the user should know (`! text`).
    Warning(String),
    /// What the user can run next (`→ text`).
    Next(String),
    /// A fact only a verbose run shows (`• text` with `-v`): the container's `docker run` line.
    Detail(String),
    /// A container started and answers at `endpoint` (the stream's `container` event, which
    /// `tt` reads to find the server).
    Container {
        /// The container's name.
        name: String,
        /// Where it answers, on loopback.
        endpoint: String,
    },
}

impl Event {
    /// [`Event::Done`] with an optional detail.
    pub fn done(what: impl Into<String>, detail: Option<String>) -> Self {
        Event::Done {
            what: what.into(),
            detail,
        }
    }

    /// [`Event::Skipped`] with an optional detail.
    pub fn skipped(what: impl Into<String>, detail: Option<String>) -> Self {
        Event::Skipped {
            what: what.into(),
            detail,
        }
    }

    /// [`Event::StepStart`].
    pub fn step_start(key: &str, label: impl Into<String>) -> Self {
        Event::StepStart {
            key: key.to_string(),
            label: label.into(),
        }
    }

    /// [`Event::StepDone`] with an optional detail.
    pub fn step_done(key: &str, what: impl Into<String>, detail: Option<String>) -> Self {
        Event::StepDone {
            key: key.to_string(),
            what: what.into(),
            detail,
        }
    }
}
