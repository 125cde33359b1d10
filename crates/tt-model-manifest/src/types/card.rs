//! `card`: the model card's prose sections and frontmatter.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::decode::{Cx, Fields, FromNode};
use crate::node::Node;

/// The card's license.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct License {
    /// A Hub licence identifier (`apache-2.0`, `mit`, `other`, …).
    pub id: String,
    /// The licence's name (required when `id` is `other`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Where the licence text is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
}

macro_rules! card_settings {
    ($($field:ident: $doc:literal),* $(,)?) => {
        /// The `card` block; each prose field becomes a fixed section of the rendered card.
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[schemars(deny_unknown_fields)]
        pub struct CardSettings {
            $(
                #[doc = $doc]
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $field: Option<String>,
            )*
            /// The licence frontmatter.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub license: Option<License>,
            /// The Hub pipeline tag (default per kind: `text-generation` for the vLLM kinds).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub pipeline_tag: Option<String>,
            /// The base models (default: the weights repository).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub base_model: Vec<String>,
        }

        /// The prose sections, in card order.
        pub const CARD_SECTIONS: &[&str] = &[$(stringify!($field)),*];

        impl CardSettings {
            /// `(section, text)` for every prose section that is set.
            pub fn sections(&self) -> Vec<(&'static str, &str)> {
                let mut out = Vec::new();
                $(
                    if let Some(text) = &self.$field {
                        out.push((stringify!($field), text.as_str()));
                    }
                )*
                out
            }
        }

        impl FromNode for CardSettings {
            fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
                let f = Fields::new(node, path, CARD_KEYS, cx)?;
                $( let $field = f.opt::<String>(stringify!($field), cx); )*
                let license = f.opt("license", cx);
                let pipeline_tag = f.opt::<String>("pipeline_tag", cx);
                let base_model = f.or_default("base_model", cx);
                Some(Self {
                    $( $field: $field?.map(normalise), )*
                    license: license?,
                    pipeline_tag: pipeline_tag?.map(normalise),
                    base_model: base_model?,
                })
            }
        }
    };
}

card_settings! {
    description: "What the model is and does.",
    quickstart: "How to run it.",
    architecture: "How it is built.",
    status: "How finished it is.",
    intended_use: "What it is for.",
    out_of_scope_use: "What it is not for.",
    usage: "How to call it.",
    performance: "Measured accuracy and speed (required to publish).",
    limitations: "Known limitations (required to publish).",
    risks: "Risks.",
    licensing: "Licensing notes.",
    related: "Related models and links.",
}

/// The keys `card` accepts.
pub const CARD_KEYS: &[&str] = &[
    "description",
    "quickstart",
    "architecture",
    "status",
    "intended_use",
    "out_of_scope_use",
    "usage",
    "performance",
    "limitations",
    "risks",
    "licensing",
    "related",
    "license",
    "pipeline_tag",
    "base_model",
];
/// The keys `card.license` accepts.
pub const LICENSE_KEYS: &[&str] = &["id", "name", "link"];

/// A folded scalar's trailing newline is not part of the value (`other\n` is `other`).
fn normalise(text: String) -> String {
    let trimmed = text.trim_end_matches('\n');
    if trimmed.len() == text.len() {
        text
    } else {
        trimmed.to_owned()
    }
}

impl FromNode for License {
    fn from_node(node: &Node, path: &str, cx: &mut Cx<'_>) -> Option<Self> {
        let f = Fields::new(node, path, LICENSE_KEYS, cx)?;
        let id = f.req::<String>("id", cx);
        let name = f.opt::<String>("name", cx);
        let link = f.opt::<String>("link", cx);
        Some(Self {
            id: normalise(id?),
            name: name?.map(normalise),
            link: link?.map(normalise),
        })
    }
}

impl CardSettings {
    /// The sections a publish requires that are missing or blank (`performance`,
    /// `limitations`).
    pub fn publish_gaps(&self) -> Vec<&'static str> {
        let blank = |s: &Option<String>| s.as_deref().is_none_or(|t| t.trim().is_empty());
        let mut gaps = Vec::new();
        if blank(&self.performance) {
            gaps.push("performance");
        }
        if blank(&self.limitations) {
            gaps.push("limitations");
        }
        gaps
    }
}
