//! Which model stages the host ran for one forward: what `device.host_stages` reports, so a
//! reader of `/info` or `predict --stats-json` sees what is left to move to the device.

use serde::ser::SerializeSeq;

/// One stage of a served forward, in the order a forward runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Stage {
    /// Image decode, resize and normalisation (the server's pipeline).
    Preprocess,
    /// The prompt: chat template and tokenizer (the server's pipeline).
    Tokenize,
    /// The SigLIP2 vision tower.
    Vision,
    /// The projector (`mlp1`).
    Projector,
    /// Qwen3 up to `select_layer`, with its final norm.
    Llm,
    /// The action head's LayerNorm of the VL features.
    Vlln,
    /// The state encoder.
    StateEncoder,
    /// The action encoder, per step.
    ActionEncoder,
    /// The DiT's timestep embedding, per step.
    TimestepEncoder,
    /// The DiT blocks, per step.
    Dit,
    /// The DiT's output layer (`proj_out_1`, LayerNorm, `proj_out_2`), per step.
    DitOutput,
    /// The action decoder, per step.
    ActionDecoder,
    /// The Euler update, per step.
    Euler,
    /// Unnormalising the chunk into the embodiment's actions (the server's pipeline).
    Decode,
}

impl Stage {
    /// Every stage, in forward order.
    pub const ALL: [Stage; 14] = [
        Stage::Preprocess,
        Stage::Tokenize,
        Stage::Vision,
        Stage::Projector,
        Stage::Llm,
        Stage::Vlln,
        Stage::StateEncoder,
        Stage::ActionEncoder,
        Stage::TimestepEncoder,
        Stage::Dit,
        Stage::DitOutput,
        Stage::ActionDecoder,
        Stage::Euler,
        Stage::Decode,
    ];

    /// The name `device.host_stages` lists.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Preprocess => "preprocess",
            Stage::Tokenize => "tokenize",
            Stage::Vision => "vision",
            Stage::Projector => "projector",
            Stage::Llm => "llm",
            Stage::Vlln => "vlln",
            Stage::StateEncoder => "state_encoder",
            Stage::ActionEncoder => "action_encoder",
            Stage::TimestepEncoder => "timestep_encoder",
            Stage::Dit => "dit",
            Stage::DitOutput => "dit_output",
            Stage::ActionDecoder => "action_decoder",
            Stage::Euler => "euler",
            Stage::Decode => "decode",
        }
    }
}

/// A set of [`Stage`]s; serialises as their names in forward order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostStages(u16);

impl HostStages {
    /// No stage.
    pub const NONE: HostStages = HostStages(0);
    /// The Eagle backbone and vlln: what [`crate::model::Gr00tModel::encode`] runs.
    pub const BACKBONE: HostStages =
        HostStages::of(&[Stage::Vision, Stage::Projector, Stage::Llm, Stage::Vlln]);
    /// The whole flow-matching loop as the host conducts it, the DiT included.
    pub const HEAD: HostStages = HostStages::of(&[
        Stage::StateEncoder,
        Stage::ActionEncoder,
        Stage::TimestepEncoder,
        Stage::Dit,
        Stage::DitOutput,
        Stage::ActionDecoder,
        Stage::Euler,
    ]);
    /// What the server's pipeline runs around every forward.
    pub const PIPELINE: HostStages =
        HostStages::of(&[Stage::Preprocess, Stage::Tokenize, Stage::Decode]);

    /// The set of `stages`.
    pub const fn of(stages: &[Stage]) -> HostStages {
        let mut bits = 0u16;
        let mut i = 0;
        while i < stages.len() {
            bits |= 1 << stages[i] as u8;
            i += 1;
        }
        HostStages(bits)
    }

    /// Both sets.
    pub const fn union(self, other: HostStages) -> HostStages {
        HostStages(self.0 | other.0)
    }

    /// This set without `stage`.
    pub const fn without(self, stage: Stage) -> HostStages {
        HostStages(self.0 & !(1 << stage as u8))
    }

    /// Whether `stage` is in the set.
    pub const fn contains(self, stage: Stage) -> bool {
        self.0 & (1 << stage as u8) != 0
    }

    /// The names, in forward order.
    pub fn names(self) -> Vec<&'static str> {
        Stage::ALL
            .into_iter()
            .filter(|s| self.contains(*s))
            .map(Stage::name)
            .collect()
    }
}

impl serde::Serialize for HostStages {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let names = self.names();
        let mut seq = s.serialize_seq(Some(names.len()))?;
        for n in names {
            seq.serialize_element(n)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_list_their_names_in_forward_order() {
        let s = HostStages::PIPELINE.union(HostStages::BACKBONE);
        assert_eq!(
            s.names(),
            [
                "preprocess",
                "tokenize",
                "vision",
                "projector",
                "llm",
                "vlln",
                "decode"
            ]
        );
        assert_eq!(
            serde_json::to_value(HostStages::HEAD.without(Stage::Dit)).unwrap(),
            serde_json::json!([
                "state_encoder",
                "action_encoder",
                "timestep_encoder",
                "dit_output",
                "action_decoder",
                "euler"
            ])
        );
        assert!(HostStages::NONE.names().is_empty());
        assert!(!HostStages::BACKBONE.contains(Stage::Dit));
        assert_eq!(Stage::ALL.len(), Stage::Decode as usize + 1);
    }
}
