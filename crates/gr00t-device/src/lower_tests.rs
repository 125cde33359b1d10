//! The programs a graph is lowered to (`lower.rs`, `lower_parts.rs`), checked without a
//! device: a full-width SigLIP2 layer's chain (LayerNorm, attention, four matmuls and their
//! ends on the plan's cores) against the semaphore line it must keep, and the words and tables
//! the worker only fills in.

use std::collections::BTreeMap;

use tt_blackhole::plan::program::{Core, MAX_ARGS, TABLE_WORDS};

use super::graph_steps::GraphStep;
use super::lower::{LowerError, lower_step, pair};
use super::program::{KernelConfig, Program};
use super::protocol::ActDtype;
use super::registry::{READER_TABLE_CB, WRITER_TABLE_CB};
use super::vision_graph_tests::full_width_vision_layer;

/// A full-width SigLIP2 layer's graph lowered: one chain program, and the packed step it is
/// lowered from.
fn vision_layer_lowered() -> (Program, GraphStep) {
    let (request, steps) = full_width_vision_layer();
    assert_eq!((steps.len(), request.programs.len()), (1, 1));
    let program = request.programs.into_iter().next().unwrap();
    (program, steps.into_iter().next().unwrap())
}

fn vision_layer_program() -> Program {
    vision_layer_lowered().0
}

/// The plan's model of a chain's words (`plan::program::chain_words`, which bounds what the
/// packer puts in one program) against the words the lowering writes: the compute args
/// exactly, the longest task table at least (the model counts every end's stream word), so the
/// packer never accepts a chain the lowering would refuse.
#[test]
fn the_plan_s_word_model_bounds_what_the_lowering_writes() {
    let (p, step) = vision_layer_lowered();
    let GraphStep::Chain(c) = step else {
        panic!("a chain: {step:?}");
    };
    let needs: Vec<_> = c.steps.iter().map(super::graph_pack::need_of).collect();
    let (args, table) = tt_blackhole::plan::program::chain_words(&needs, &c.cores);
    let longest = |compute: bool| {
        p.kernels
            .iter()
            .filter(|k| matches!(k.config, KernelConfig::Compute { .. }) == compute)
            .flat_map(|k| &k.cores)
            .map(|c| c.words.len())
            .max()
            .unwrap()
    };
    assert_eq!(args, longest(true), "compute args");
    assert!(
        table >= longest(false),
        "table: model {table}, lowered {}",
        longest(false)
    );
}

/// Every core of a phase signals every core of the next once, so a core's semaphore ends at
/// the sum of the cores of the phases before each of its own; the semaphore is on every core
/// some phase waits on; a signal names a core by its NOC coordinates, which the worker writes.
#[test]
fn a_chain_signals_every_core_of_the_next_phase_once() {
    let p = vision_layer_program();
    let kinds: Vec<&str> = p.phases.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "rows",
            "matmul",
            "end",
            "attention",
            "matmul",
            "end",
            "rows",
            "matmul",
            "end",
            "matmul",
            "end"
        ]
    );
    assert_eq!(p.steps, 4);
    // Each phase's cores, in line order, from the reader kernels' cores of its kind: the
    // phases report only counts, so rebuild the expected increments from the counts.
    let counts: Vec<usize> = p.phases.iter().map(|(_, n)| *n as usize).collect();
    let signals: usize = p
        .kernels
        .iter()
        .filter(|k| k.config == KernelConfig::Writer)
        .flat_map(|k| &k.cores)
        .map(|c| c.nocs.len())
        .sum();
    let want: usize = counts.windows(2).map(|w| w[0] * w[1]).sum();
    assert_eq!(signals, want, "phase i's cores x phase i+1's, once each");
    // Per target core: the signals it gets are the cores of the phase before each of its own.
    let mut got = BTreeMap::<Core, usize>::new();
    for k in p
        .kernels
        .iter()
        .filter(|k| k.config == KernelConfig::Writer)
    {
        for c in &k.cores {
            for &(_, x, y) in &c.nocs {
                *got.entry((x, y)).or_default() += 1;
            }
        }
    }
    let [waiting] = p.semaphores.as_slice() else {
        panic!("one semaphore: {:?}", p.semaphores.len());
    };
    assert_eq!(got.keys().copied().collect::<Vec<_>>(), *waiting);
}

/// The words the worker gets: every tensor a word or accessor names is one of the program's,
/// a table is a power of two of at least 16 words and holds its longest row, within the plan's
/// bound, on a CB of its role's id on exactly its cores; compute args are padded to one length
/// that their compile-time args carry.
#[test]
fn a_program_s_words_name_its_tensors_and_fit_their_tables() {
    let p = vision_layer_program();
    let n = p.tensors.len();
    for k in &p.kernels {
        assert!(k.accessors.iter().all(|&t| t < n), "{}", k.source);
        let cores: Vec<Core> = k.cores.iter().map(|c| c.core).collect();
        for c in &k.cores {
            assert!(c.addrs.iter().all(|&(i, t)| i < c.words.len() && t < n));
            assert!(c.nocs.iter().all(|&(i, ..)| i < c.words.len()));
        }
        let longest = k.cores.iter().map(|c| c.words.len()).max().unwrap();
        match (k.table_width, &k.config) {
            (Some(w), cfg) => {
                assert!(w >= 16 && w.is_power_of_two() && w >= longest && longest <= TABLE_WORDS);
                let id = if *cfg == KernelConfig::Writer {
                    WRITER_TABLE_CB
                } else {
                    READER_TABLE_CB
                };
                let cb = p
                    .cbs
                    .iter()
                    .find(|cb| cb.index == id && cb.cores == cores)
                    .expect("the table's CB on its cores");
                assert_eq!((cb.page, cb.pages), (w * 4, 1));
            }
            (None, KernelConfig::Compute { .. }) => {
                assert!(k.cores.iter().all(|c| c.words.len() == longest));
                assert_eq!(k.compile_args, [longest as u32]);
                assert!(longest <= MAX_ARGS);
            }
            (None, other) => panic!("a chain's {other:?} without a table"),
        }
    }
    // The first tensors are the LayerNorm's output (allocated) and its inputs (the worker's).
    assert_eq!(p.tensors[0].alloc.map(|a| a.2), Some(ActDtype::Bf16));
    assert!(p.tensors[1].alloc.is_none());
}

/// A value past the half word the kernels read it from is refused here, named, not written
/// wrapped into a table.
#[test]
fn a_value_past_its_half_word_is_a_typed_error() {
    assert_eq!(pair("mt, nt", 3, 4), Ok(3 | 4 << 16));
    assert!(matches!(
        pair("mt, nt", 1 << 16, 1),
        Err(LowerError::Overflow {
            what: "mt, nt",
            bits: 16,
            ..
        })
    ));
    // A relayout whose progressions overrun tt-metal's runtime args.
    let long = super::worker_replay_tests::copy(vec![vec![0; 400]]);
    let err = lower_step(&long, [13, 10]).unwrap_err();
    assert!(
        matches!(err, LowerError::Args { core: (0, 0), .. }),
        "{err}"
    );
    assert!(err.to_string().contains("341"), "{err}");
}
