//! The LLM's input rows gathered on the device (`super::gather`, issue 40): offline, the ids and
//! the table as the host lays them out and the step the graph gets; on the simulated p150a, the
//! tiny checkpoint's own embedding table and a 2048-column one, each token's row bit for bit
//! (the table's bf16 values widened, the image rows' fp32 values as they are).

use std::time::Instant;

use tt_blackhole::ArenaDtype;
use tt_blackhole::bf16::round_to_bf16;

use super::gather::{TokenSource, check_tokens, ids_tile, table_rows};
use super::graph::{Graph, Upload};
use super::graph_steps::GraphStep;
use super::head_graph_tests::{compare, draw};
use super::protocol::ActDtype;
use super::registry::cb_id;
use super::tests::{require_simulator, sim_policy_with};
use gr00t_runtime::weights::{WeightSource, WeightStore};

use TokenSource::{Image, Text};

/// The tiny checkpoint's token-embedding table.
const EMBED: &str = "backbone.model.language_model.model.embed_tokens.weight";
/// Qwen3's `<IMG_CONTEXT>` id: the prompt's image tokens.
const IMG_CONTEXT: u32 = 151669;

#[test]
fn ids_and_table_are_laid_out_as_the_reader_reads_them() {
    let tokens = [Text(0), Image(0), Text(151_679), Image(80), Text(7)];
    let ids = ids_tile(&tokens);
    assert_eq!(ids.len(), 32 * 32, "one tile for up to 32 tokens");
    assert_eq!(&ids[..5], &[0.0, -1.0, 151_679.0, -81.0, 7.0]);
    assert!(ids[5..].iter().all(|v| *v == 0.0), "the rest zero");
    // 33 tokens: two tiles' columns, the 33rd token in row 0's column 32.
    let many: Vec<TokenSource> = (0..33).map(|i| Text(i + 100)).collect();
    let ids = ids_tile(&many);
    assert_eq!(ids.len(), 32 * 64);
    assert_eq!(ids[32], 132.0);
    assert!(ids[64..].iter().all(|v| *v == 0.0), "rows 1.. zero");
    // The largest rows the ids hold are exact integers.
    let top = (1 << 24) - 2;
    let ids = ids_tile(&[Text(top as u32), Image(top)]);
    assert_eq!(
        (ids[0] as i64, ids[1] as i64),
        (top as i64, -(top as i64) - 1)
    );

    // A [3, 40] table: [32, 64] of bf16 values, zero padded.
    let mut seed = 0x9a_u64;
    let table = draw(&mut seed, 3 * 40, 2.0);
    let rows = table_rows(&table, 3, 40);
    assert_eq!(rows.len(), 32 * 64);
    for r in 0..32 {
        for c in 0..64 {
            let want = if r < 3 && c < 40 {
                round_to_bf16(table[r * 40 + c])
            } else {
                0.0
            };
            assert_eq!(rows[r * 64 + c].to_bits(), want.to_bits(), "({r}, {c})");
        }
    }
    assert!(
        rows.iter().all(|v| v.to_bits() & 0xffff == 0),
        "bf16 values"
    );
}

#[test]
fn tokens_past_their_tensors_are_refused() {
    let ok = [Text(9), Image(2)];
    assert!(check_tokens(&ok, 10, 3).is_ok());
    assert!(
        check_tokens(&[Text(10)], 10, 3).is_err(),
        "past the vocabulary"
    );
    assert!(
        check_tokens(&[Image(3)], 10, 3).is_err(),
        "past the image rows"
    );
    let big = 1 << 25;
    assert!(
        check_tokens(&[Image(big)], 10, big + 1).is_err(),
        "not exact in f32"
    );
}

/// The gather is a row program the worker runs as it runs the norms: its CBs are the ones the
/// worker sizes by `reader_rows.cpp`'s ids (x, the scaler it reads the ids into) and the
/// writer's; the step names the table as x, the ids as the scaler, the image rows as g, the
/// token count in `vec_len`, cb_x unpacked straight to the fp32 DST.
#[test]
fn the_gather_is_a_row_step_the_worker_runs_as_it_is() {
    use tt_blackhole::plan::{GRID_X, GRID_Y, L1_BUDGET};
    let same = |a: (&str, &str), b: (&str, &str)| {
        assert_eq!(cb_id(a.0, a.1), cb_id(b.0, b.1), "{a:?} and {b:?}");
    };
    same(("gather_rows.cpp", "cb_x"), ("reader_rows.cpp", "cb_x"));
    same(
        ("gather_rows.cpp", "cb_ids"),
        ("reader_rows.cpp", "cb_scaler"),
    );
    same(("gather_rows.cpp", "cb_x"), ("pass_rows.cpp", "cb_x"));
    same(("pass_rows.cpp", "cb_y"), ("writer_tiles.cpp", "cb_out"));
    for taken in [
        ("reader_rows.cpp", "cb_x"),
        ("reader_rows.cpp", "cb_scaler"),
    ] {
        assert_ne!(
            cb_id("gather_rows.cpp", "cb_scratch"),
            cb_id(taken.0, taken.1)
        );
    }
    assert_ne!(
        cb_id("gather_rows.cpp", "cb_scratch"),
        cb_id("writer_tiles.cpp", "cb_out")
    );

    let cfg = gr00t_runtime::config::Gr00tConfig::default();
    let dims = gr00t_megakernel::dit_dims(&cfg, 1);
    let index = tt_blackhole::arena::arena_layout(&dims, ArenaDtype::Bfp8B);
    let plan = tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap();
    let mut g = Graph::for_arena(&index, [GRID_X, GRID_Y], &plan);
    assert!(
        g.gather_rows("t/ids", 0, ["t/tab", "t/img"], 16, "t/x")
            .is_err()
    );
    g.gather_rows("t/ids", 70, ["t/tab", "t/img"], 2048, "t/x")
        .unwrap();
    let (request, steps) = g.lowered(&Upload::new(), &[], None, true).unwrap();
    assert_eq!(request.programs.len(), 1);
    let GraphStep::Rows(st) = &steps[0] else {
        panic!("not a row step: {:?}", steps[0]);
    };
    assert_eq!(
        (st.x.as_str(), st.scaler.as_str(), st.g.as_str()),
        ("t/tab", "t/ids", "t/img")
    );
    assert_eq!(
        (st.vec_len, st.wt, st.row_tiles, st.out_f32),
        (70, 64, 3, true)
    );
    assert_eq!(st.unpack_to_dest, vec![cb_id("pass_rows.cpp", "cb_x")]);
    assert!(st.l1_bytes() <= L1_BUDGET, "{} B of L1", st.l1_bytes());
    for name in [&st.kernels.reader, &st.kernels.compute, &st.kernels.writer] {
        let src = &request.sources[name];
        // A marker is a line of its own (a pasted header's comments may quote one).
        let left = src
            .lines()
            .find(|l| l.trim_start().starts_with("//@@GR00T_"));
        assert_eq!(left, None, "{name}: a marker left");
    }
}

/// The graph's output `[32·⌈n/32⌉, 32·wt]` as the device should give it: row t the token's
/// source row (`table`: the [`table_rows`] values, `image`: the padded image rows, both 32·wt
/// wide), the rest zero.
fn want_rows(tokens: &[TokenSource], table: &[f32], image: &[f32], wt: usize) -> Vec<f32> {
    let cols = 32 * wt;
    let mut out = vec![0f32; 32 * tokens.len().div_ceil(32) * cols];
    for (row, t) in out.chunks_exact_mut(cols).zip(tokens) {
        let (src, r) = match *t {
            Text(id) => (table, id as usize),
            Image(k) => (image, k),
        };
        row.copy_from_slice(&src[r * cols..(r + 1) * cols]);
    }
    out
}

/// Runs one gather graph on the simulator: the table (`[vocab, hidden]`), the image rows
/// (`[blocks, hidden]`) and the tokens go in, the whole padded output comes back. Checks it bit
/// for bit and prints the seconds.
fn gather_on_sim(
    name: &str,
    tokens: &[TokenSource],
    [vocab, hidden]: [usize; 2],
    table: &[f32],
    image: &[f32],
) {
    let blocks = image.len() / hidden;
    check_tokens(tokens, vocab, blocks).unwrap();
    let (wt, n) = (hidden.div_ceil(32), tokens.len());
    let cols = 32 * wt;
    let rows = table_rows(table, vocab, hidden);
    let mut image_p = vec![0f32; 32 * blocks.div_ceil(32) * cols];
    for (d, s) in image_p
        .chunks_exact_mut(cols)
        .zip(image.chunks_exact(hidden))
    {
        d[..hidden].copy_from_slice(s);
    }
    let want = want_rows(tokens, &rows, &image_p, wt);

    // A full-width table's first run (the kernels' JIT build included) takes tens of seconds on
    // the simulator under CI's load: the full-width tests' deadline, as the other layers'.
    let sim = sim_policy_with(&gr00t_megakernel::MegakernelConfig {
        dtype: ArenaDtype::Bfp8B,
        device: "sim".into(),
        device_timeout: std::time::Duration::from_secs(600),
        ..gr00t_megakernel::MegakernelConfig::default()
    });
    let dev = crate::tests::tt(&sim);
    let dims = gr00t_megakernel::dit_dims(&sim.model().cfg.gr00t, 1);
    let plan = tt_blackhole::plan::build_plan(&dims, ArenaDtype::Bfp8B).unwrap();
    let mut up = Upload::new();
    up.add("t/g/table", rows.len() / cols, cols, ActDtype::Bf16, &rows);
    up.add(
        "t/g/image",
        image_p.len() / cols,
        cols,
        ActDtype::F32,
        &image_p,
    );
    up.add(
        "t/g/ids",
        32,
        32 * n.div_ceil(32),
        ActDtype::F32,
        &ids_tile(tokens),
    );
    let mut g = Graph::new(dev, &plan);
    g.gather_rows("t/g/ids", n, ["t/g/table", "t/g/image"], hidden, "t/g/x")
        .unwrap();
    let outputs = [("t/g/x", 32 * n.div_ceil(32), cols)];
    let (request, _) = g.request(&up, &outputs, None, true).unwrap();
    let t0 = Instant::now();
    let (reply, back) = dev.call(&request, &up.bytes()).unwrap();
    let secs = t0.elapsed().as_secs_f64();
    let got: Vec<f32> = back
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let (p, err, top) = compare(name, &got, &want);
    let program_ms: f64 = reply
        .answer
        .by_label
        .get("gather_rows")
        .map_or(0.0, |t| t.1);
    eprintln!(
        "{name}: {n} tokens x {hidden} columns from a [{vocab}, {hidden}] table and {blocks} \
         image rows: PCC {p:.8}, max |err| {err:.3e} (max |value| {top:.3}); {secs:.1} s the \
         exchange (upload included), {:.1} s the program",
        program_ms / 1e3
    );
    let differ: Vec<usize> = (0..want.len())
        .filter(|&i| got[i].to_bits() != want[i].to_bits())
        .collect();
    assert!(
        differ.is_empty(),
        "{name}: {} values differ, the first at row {}, column {}",
        differ.len(),
        differ[0] / cols,
        differ[0] % cols
    );
}

/// The tiny checkpoint's own table (151680 × 16, as the device holds it in bf16) and 81 random
/// fp32 image rows, 42 tokens (two tile rows, the second partly padding): the golden prompt's
/// first 24 text ids, image rows from every part of the image tensor (both halves of its tiles, all
/// three tile rows), the golden's 3 ids after its image block, ids 0, vocab − 1 and
/// `<IMG_CONTEXT>` looked up as text.
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_tiny_embedding_rows_gather_exactly() {
    require_simulator("sim_tiny_embedding_rows_gather_exactly");
    let ws = WeightStore::open_dir(&crate::golden_case::case_dir()).unwrap();
    let (vocab, hidden) = (151_680, 16);
    let table = ws.f32(EMBED, &[vocab, hidden]).unwrap();
    let ids = crate::golden_case::golden_inputs().input_ids;
    let first_image = ids.iter().position(|&v| v == IMG_CONTEXT).unwrap();
    let after = ids.iter().rposition(|&v| v == IMG_CONTEXT).unwrap() + 1;
    let mut tokens: Vec<TokenSource> = ids[..first_image.min(24)]
        .iter()
        .map(|&v| Text(v))
        .collect();
    tokens.extend([0, 1, 15, 16, 17, 31, 32, 47, 48, 63, 64, 80].map(Image));
    tokens.extend(ids[after..].iter().map(|&v| Text(v)));
    tokens.extend([Text(0), Text(vocab as u32 - 1), Text(IMG_CONTEXT)]);
    let mut seed = 0x6e_u64;
    let image = draw(&mut seed, 81 * hidden, 4.0);
    gather_on_sim("tiny table", &tokens, [vocab, hidden], &table, &image);
}

/// The full width (2048 columns: 64 column tiles, 16 chunks of the reader's): a random 300-row
/// table and 40 random image rows, 73 tokens (three tile rows, the rows shared over cores).
#[test]
#[ignore = "needs the simulated p150a: scripts/device-sim-tests.sh runs it"]
fn sim_full_width_rows_gather_exactly() {
    require_simulator("sim_full_width_rows_gather_exactly");
    let (vocab, hidden, blocks) = (300, 2048, 40);
    let mut seed = 0x2048_u64;
    let table = draw(&mut seed, vocab * hidden, 0.1);
    let image = draw(&mut seed, blocks * hidden, 3.0);
    let tokens: Vec<TokenSource> = (0..70)
        .map(|i| match i % 5 {
            1 | 3 => Image((i * 7) % blocks),
            _ => Text(((i * 37 + 1) % vocab) as u32),
        })
        .chain([Text(0), Text(vocab as u32 - 1), Image(blocks - 1)])
        .collect();
    gather_on_sim("full width", &tokens, [vocab, hidden], &table, &image);
}
