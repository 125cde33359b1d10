//! Each device program's deadline, derived from what the program is expected to take.
//!
//! The worker announces every program of a `graph` or `replay` before it launches it
//! (`gr00t-worker: program of N steps: LABEL`, [`super::worker::CHAIN_LINE`]) and says when it
//! is done ([`super::worker::PROGRESS_LINE`]); the watchdog gives each program the deadline
//! [`ProgramDeadlines::for_program`] derives for it, and the host's work between programs (the
//! inputs put, the outputs read back) the exchange deadline (`GR00T_MK_DEVICE_TIMEOUT_S`).
//!
//! A program's expected time is, in this order: the slowest program of its label in the last
//! exchange that ran one (the worker's `by_label`, [`ProgramDeadlines::learn`]); on a card, the
//! roofline's bound for any one program ([`program_roofline`]); else unknown (the first run on
//! the simulator). Known: `floor + factor × expected`, plus the exchange deadline when the
//! program is built in its exchange (a `graph`: tt-metal may JIT-compile its kernels there; a
//! `replay` launches programs already built). Unknown: the exchange deadline per step of the
//! program, the generous rule every program had before (`docs/blackhole.md` §12).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use tt_blackhole::plan::MegakernelPlan;
use tt_blackhole::plan::roofline::roofline;

use super::protocol::LabelTimes;
use super::worker::TIMEOUT_VAR;

/// How a program's deadline follows from its expected time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeadlineRule {
    /// Added to every known program's deadline: a loaded host's jitter, the worker's own work
    /// inside the program's window (building it, waiting for the device).
    pub floor: Duration,
    /// The expected time is multiplied by this.
    pub factor: f64,
    /// The exchange deadline (`GR00T_MK_DEVICE_TIMEOUT_S`): per step of a program whose time is
    /// not known, and the compile allowance of a program built in its exchange.
    pub exchange: Duration,
}

impl DeadlineRule {
    /// A program may take this many times its expected time.
    pub const FACTOR: f64 = 3.0;
    /// The floor on a card: its programs take milliseconds; a hang is seen within seconds.
    pub const CARD_FLOOR: Duration = Duration::from_secs(5);
    /// The floor on the simulator: its programs take seconds to tens of seconds, up to 2×
    /// more on a loaded host (`docs/blackhole.md` §8); a hang is seen within minutes.
    pub const SIMULATOR_FLOOR: Duration = Duration::from_secs(30);

    /// The rule for a card or the simulator, with the exchange deadline `exchange`.
    pub fn for_device(simulator: bool, exchange: Duration) -> Self {
        DeadlineRule {
            floor: if simulator {
                Self::SIMULATOR_FLOOR
            } else {
                Self::CARD_FLOOR
            },
            factor: Self::FACTOR,
            exchange,
        }
    }
}

/// What a program is expected to take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Expected {
    /// Its label's slowest program in the last exchange that ran one, as the worker timed it.
    Measured(Duration),
    /// The roofline's bound (a card, before the label ran).
    Roofline(Duration),
    /// Nothing to go by yet (the simulator, before the label ran).
    Unknown,
}

/// The deadline of one program and how it was derived, for the error that reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Deadline {
    /// How long the program may take.
    pub limit: Duration,
    /// How `limit` was derived, in words.
    pub why: String,
}

/// The deadline of a program of `steps` steps expected to take `expected`; `built`: the
/// program is built in its exchange (a `graph`), so its kernels may compile within it.
/// Known: `floor + factor × expected` (+ the exchange deadline when built); unknown: the
/// exchange deadline `steps` times.
pub fn program_deadline(
    rule: &DeadlineRule,
    expected: Expected,
    steps: u32,
    built: bool,
) -> Duration {
    let t = match expected {
        Expected::Measured(t) | Expected::Roofline(t) => t,
        Expected::Unknown => return rule.exchange * steps.max(1),
    };
    let compile = if built { rule.exchange } else { Duration::ZERO };
    rule.floor + t.mul_f64(rule.factor) + compile
}

/// Seconds as an error shows them: to the millisecond, no trailing zeros (`0.5`, `15`).
pub fn secs(d: Duration) -> String {
    format!("{}", (d.as_secs_f64() * 1e3).round() / 1e3)
}

/// [`program_deadline`] with its derivation in words, for program `label`.
pub fn derive(
    rule: &DeadlineRule,
    label: &str,
    expected: Expected,
    steps: u32,
    built: bool,
) -> Deadline {
    let limit = program_deadline(rule, expected, steps, built);
    let (t, from) = match expected {
        Expected::Measured(t) => (t, "measured"),
        Expected::Roofline(t) => (t, "roofline"),
        Expected::Unknown => {
            return Deadline {
                limit,
                why: format!(
                    "program `{label}` of {steps} steps, its time not known yet: {} × {} s ({TIMEOUT_VAR})",
                    steps.max(1),
                    secs(rule.exchange)
                ),
            };
        }
    };
    let compile = if built {
        format!(" + {} s to build it ({TIMEOUT_VAR})", secs(rule.exchange))
    } else {
        String::new()
    };
    Deadline {
        limit,
        why: format!(
            "program `{label}`: {} × {} s {from} + {} s floor{compile}",
            rule.factor,
            secs(t),
            secs(rule.floor)
        ),
    }
}

/// The roofline's bound for any one program of `plan` on a card: the whole arena streamed once
/// or the step's FLOPs at the kernels' fidelity, whichever is longer (no program of ours reads
/// a weight twice, nor does more than a step's matmuls).
pub fn program_roofline(plan: &MegakernelPlan) -> Duration {
    let r = roofline(plan);
    Duration::from_secs_f64(r.dram_bound_us_per_step.max(r.compute_bound_us_per_step) / 1e6)
}

/// What the device's programs are expected to take, by label, and the rule that turns that
/// into their deadlines. Kept by the device across reopens.
#[derive(Debug, Clone, PartialEq)]
pub struct ProgramDeadlines {
    rule: DeadlineRule,
    measured: HashMap<String, Duration>,
    roofline: Option<Duration>,
}

impl ProgramDeadlines {
    /// Nothing measured, no roofline.
    pub fn new(rule: DeadlineRule) -> Self {
        ProgramDeadlines {
            rule,
            measured: HashMap::new(),
            roofline: None,
        }
    }

    /// The rule in force.
    pub fn rule(&self) -> &DeadlineRule {
        &self.rule
    }

    /// On a card: the roofline's bound for a program no run has measured yet.
    pub fn set_roofline(&mut self, bound: Duration) {
        self.roofline = Some(bound);
    }

    /// What a program of `label` is expected to take: measured, else the roofline, else
    /// unknown.
    pub fn expected(&self, label: &str) -> Expected {
        match (self.measured.get(label), self.roofline) {
            (Some(t), _) => Expected::Measured(*t),
            (None, Some(t)) => Expected::Roofline(t),
            (None, None) => Expected::Unknown,
        }
    }

    /// Learn from a `graph` or `replay` answer's `by_label` ({label: (programs, total ms,
    /// slowest ms)}): each label's slowest program replaces what was known of it.
    pub fn learn(&mut self, by_label: &BTreeMap<String, LabelTimes>) {
        for (label, &(n, _, ms)) in by_label {
            if n > 0 && ms.is_finite() && ms >= 0.0 {
                self.measured
                    .insert(label.clone(), Duration::from_secs_f64(ms / 1e3));
            }
        }
    }

    /// The deadline of program `label` of `steps` steps in exchange `op` (built in it unless
    /// it is a `replay`).
    pub fn for_program(&self, op: &str, label: &str, steps: u32) -> Deadline {
        derive(
            &self.rule,
            label,
            self.expected(label),
            steps,
            op != "replay",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `by_label` of these labels' times.
    fn by<const N: usize>(v: [(&str, LabelTimes); N]) -> BTreeMap<String, LabelTimes> {
        v.into_iter().map(|(l, t)| (l.to_string(), t)).collect()
    }

    fn rule() -> DeadlineRule {
        DeadlineRule {
            floor: Duration::from_secs(2),
            factor: 3.0,
            exchange: Duration::from_secs(20),
        }
    }

    /// Known: floor + factor × expected, the same whether measured or from the roofline;
    /// unknown: the exchange deadline per step.
    #[test]
    fn the_deadline_is_floor_plus_factor_times_expected() {
        let r = rule();
        let t = Duration::from_millis(1500);
        for e in [Expected::Measured(t), Expected::Roofline(t)] {
            assert_eq!(
                program_deadline(&r, e, 32, false),
                Duration::from_millis(6500),
                "{e:?}"
            );
            // However many steps the program holds.
            assert_eq!(
                program_deadline(&r, e, 1, false),
                Duration::from_millis(6500)
            );
            // Built in its exchange: the exchange deadline to build (and compile) it.
            assert_eq!(
                program_deadline(&r, e, 32, true),
                Duration::from_millis(26500)
            );
        }
        assert_eq!(
            program_deadline(&r, Expected::Unknown, 32, false),
            Duration::from_secs(640)
        );
        assert_eq!(
            program_deadline(&r, Expected::Unknown, 0, true),
            Duration::from_secs(20)
        );
        // The floor alone when the program takes no time; the factor scales.
        let r2 = DeadlineRule { factor: 5.0, ..r };
        assert_eq!(
            program_deadline(&r2, Expected::Measured(Duration::ZERO), 4, false),
            Duration::from_secs(2)
        );
        assert_eq!(
            program_deadline(&r2, Expected::Measured(Duration::from_secs(1)), 4, false),
            Duration::from_secs(7)
        );
    }

    /// Measured wins over the roofline; the roofline over unknown; a label's last measurement
    /// replaces the one before (the first run's compile does not stay in it).
    #[test]
    fn expected_is_measured_else_roofline_else_unknown() {
        let mut d = ProgramDeadlines::new(rule());
        assert_eq!(d.expected("step"), Expected::Unknown);
        d.set_roofline(Duration::from_micros(2000));
        assert_eq!(
            d.expected("step"),
            Expected::Roofline(Duration::from_micros(2000))
        );
        // [programs, total ms, slowest ms]: the slowest.
        d.learn(&by([
            ("step", (2, 9000.0, 6000.0)),
            ("ln", (4, 100.0, 25.0)),
        ]));
        assert_eq!(
            d.expected("step"),
            Expected::Measured(Duration::from_secs(6))
        );
        assert_eq!(
            d.expected("ln"),
            Expected::Measured(Duration::from_millis(25))
        );
        assert_eq!(
            d.expected("other"),
            Expected::Roofline(Duration::from_micros(2000))
        );
        d.learn(&by([("step", (1, 7.0, 7.0))]));
        assert_eq!(
            d.expected("step"),
            Expected::Measured(Duration::from_millis(7))
        );
        // A label of no programs teaches nothing.
        let before = d.clone();
        d.learn(&by([("step", (0, 0.0, 0.0))]));
        assert_eq!(d, before);
    }

    /// The deadline in words names the program, the expected time and its source, the floor,
    /// and the compile allowance of a built program; unknown names the exchange deadline.
    #[test]
    fn the_derivation_is_worded() {
        let mut d = ProgramDeadlines::new(rule());
        let unknown = d.for_program("graph", "8 steps: a … b", 8);
        assert_eq!(unknown.limit, Duration::from_secs(160));
        assert_eq!(
            unknown.why,
            "program `8 steps: a … b` of 8 steps, its time not known yet: 8 × 20 s \
             (GR00T_MK_DEVICE_TIMEOUT_S)"
        );
        d.learn(&by([("8 steps: a … b", (1, 3000.0, 3000.0))]));
        let replay = d.for_program("replay", "8 steps: a … b", 8);
        assert_eq!(replay.limit, Duration::from_secs(11));
        assert_eq!(
            replay.why,
            "program `8 steps: a … b`: 3 × 3 s measured + 2 s floor"
        );
        let graph = d.for_program("graph", "8 steps: a … b", 8);
        assert_eq!(graph.limit, Duration::from_secs(31));
        assert!(
            graph
                .why
                .ends_with("+ 20 s to build it (GR00T_MK_DEVICE_TIMEOUT_S)"),
            "{}",
            graph.why
        );
        d.set_roofline(Duration::from_micros(1500));
        let card = d.for_program("replay", "ln", 1);
        assert_eq!(card.limit, Duration::from_micros(2_004_500));
        assert_eq!(card.why, "program `ln`: 3 × 0.002 s roofline + 2 s floor");
    }

    /// The rule per device: seconds on a card, minutes on the simulator; the roofline of the
    /// full-size plan bounds a program in milliseconds, so a card's deadline is its floor.
    #[test]
    fn the_rule_fits_the_device() {
        let card = DeadlineRule::for_device(false, Duration::from_secs(30));
        let sim = DeadlineRule::for_device(true, Duration::from_secs(30));
        assert!(card.floor <= Duration::from_secs(10), "{card:?}");
        assert!(sim.floor > card.floor, "{sim:?}");
        let dims = tt_blackhole::dims::DitDims::FULL;
        let plan = tt_blackhole::plan::build_plan(&dims, tt_blackhole::ArenaDtype::Bfp8B).unwrap();
        let bound = program_roofline(&plan);
        assert!(
            bound > Duration::from_micros(500) && bound < Duration::from_millis(50),
            "{bound:?}"
        );
        // A replayed full-size step on a card: killed within seconds, not 128 × 30 s.
        let limit = program_deadline(&card, Expected::Roofline(bound), 128, false);
        assert!(limit < Duration::from_secs(6), "{limit:?}");
    }
}
