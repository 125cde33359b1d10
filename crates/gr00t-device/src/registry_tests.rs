//! The kernel registry against the kernels themselves: every kernel under `kernels/` is in the
//! registry, gets exactly the CBs the registry gives it (pasted in at its own CB-ids marker, or,
//! for the kernel a program takes as it is, declared as `constexpr uint32_t cb_… = id`), uses
//! every one of them and no other, reads its task table into the registry's CB, and names no CB
//! by a bare number; and the worker's task-table CBs are the registry's.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::registry::{CB_IDS_MARKER, KERNELS, Role, with_cb_ids};

fn kernels_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernels")
}

/// Every `.cpp` under `dir`, relative to `kernels/`.
fn sources(dir: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).expect("read kernels/") {
        let p = e.expect("an entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "cpp") {
            let rel = p.strip_prefix(kernels_dir()).expect("under kernels/");
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The CBs a kernel declares: `(name, id)` of each `cb_… = <number>` in its
/// `constexpr uint32_t` declarations (aliases such as `cb_h = cb_w2` are not ids).
fn declared_cbs(src: &str) -> BTreeSet<(String, u8)> {
    let mut out = BTreeSet::new();
    for decl in src.split("constexpr uint32_t ").skip(1) {
        let decl = decl.split(';').next().unwrap_or_default();
        for item in decl.split(',') {
            let Some((name, value)) = item.split_once('=') else {
                continue;
            };
            let (name, value) = (name.trim(), value.trim());
            if let (true, Ok(id)) = (name.starts_with("cb_"), value.parse::<u8>()) {
                out.insert((name.to_string(), id));
            }
        }
    }
    out
}

/// The CB names a kernel's code uses (comments left out), but for its local aliases of another
/// CB's id (`constexpr uint32_t cb_h = cb_w2`).
fn used_cbs(src: &str) -> BTreeSet<String> {
    let code: Vec<&str> = src
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect();
    let code = code.join("\n");
    let mut aliases = BTreeSet::new();
    for decl in code.split("constexpr uint32_t ").skip(1) {
        let decl = decl.split(';').next().unwrap_or_default();
        for item in decl.split(',') {
            if let Some((name, value)) = item.split_once('=')
                && value.trim().starts_with("cb_")
            {
                aliases.insert(name.trim().to_string());
            }
        }
    }
    code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("cb_") && !aliases.contains(*w))
        .map(str::to_string)
        .collect()
}

/// The CB a kernel reads its task table into (`TaskTable<id>`).
fn table_cb(src: &str) -> Option<u8> {
    let rest = src.split("TaskTable<").nth(1)?;
    rest.split('>').next()?.trim().parse().ok()
}

#[test]
fn every_kernel_gets_exactly_the_cbs_the_registry_gives_it() {
    let mut files = Vec::new();
    sources(&kernels_dir(), &mut files);
    files.sort();
    let mut registered: Vec<String> = KERNELS.iter().map(|k| k.file.to_string()).collect();
    registered.sort();
    assert_eq!(
        files, registered,
        "the kernels under kernels/ and the registry's"
    );
    let mut own_ids = Vec::new();
    for k in KERNELS {
        let src = std::fs::read_to_string(kernels_dir().join(k.file)).expect("read a kernel");
        let want: BTreeSet<(String, u8)> =
            k.cbs.iter().map(|c| (c.name.to_string(), c.id)).collect();
        if src.contains(CB_IDS_MARKER) {
            assert_eq!(
                src.matches(CB_IDS_MARKER).count(),
                1,
                "{}: one CB-ids marker",
                k.file
            );
            let own = format!("{CB_IDS_MARKER}{}@@\n", k.file);
            assert!(src.contains(&own), "{}: its marker names another", k.file);
            assert_eq!(
                declared_cbs(&src),
                BTreeSet::new(),
                "{}: ids of its own besides the registry's",
                k.file
            );
        } else {
            own_ids.push(k.file);
        }
        // As the JIT gets it: the registry's ids pasted in (or its own).
        assert_eq!(
            declared_cbs(&with_cb_ids(&src)),
            want,
            "{}: its CBs",
            k.file
        );
        let names: BTreeSet<String> = k.cbs.iter().map(|c| c.name.to_string()).collect();
        assert_eq!(
            used_cbs(&src),
            names,
            "{}: the CBs it uses and the registry's",
            k.file
        );
        // The reader's `template class TaskTable` definition (task_table.h) is pasted in at
        // run time, not in the file: the first `TaskTable<` of the file is its use.
        assert_eq!(
            table_cb(&src),
            k.table_cb,
            "{}: its task table's CB",
            k.file
        );
        for stmt in src.split("DataflowBuffer ").skip(1) {
            let stmt = stmt.split(';').next().unwrap_or_default();
            for arg in stmt.split('(').skip(1) {
                let arg = arg.split(')').next().unwrap_or_default().trim();
                assert!(
                    arg.parse::<u32>().is_err(),
                    "{}: a CB by a bare number: DataflowBuffer …({arg})",
                    k.file
                );
            }
        }
    }
    // Every kernel goes to the worker through a paste: none declares ids of its own.
    assert!(
        own_ids.is_empty(),
        "kernels with ids of their own: {own_ids:?}"
    );
}

/// The paste each kind of kernel goes through puts its CB ids in: the compute kernels'
/// (`compose_compute`), the task-table readers' and writers' and the tile-geometry kernels'.
#[test]
fn every_paste_path_puts_the_cb_ids_in() {
    use super::attention::with_tile_columns;
    use super::sfpu::compose_compute;
    use super::task_table::with_task_table;
    for k in KERNELS {
        let src = std::fs::read_to_string(kernels_dir().join(k.file)).expect("read a kernel");
        if !src.contains(CB_IDS_MARKER) {
            continue;
        }
        let mut composed = Vec::new();
        if k.role == Role::Compute {
            composed.push(compose_compute(&src, &[]));
        }
        if src.contains("//@@GR00T_TASK_TABLE@@") {
            composed.push(with_task_table(&src));
        }
        if src.contains("//@@GR00T_TILE_COLUMNS@@") {
            composed.push(with_tile_columns(&src));
        }
        if composed.is_empty() {
            // reader_tiles.cpp: the element-wise op pastes its ids in itself (sfpu::eltwise).
            assert_eq!(k.file, "reader_tiles.cpp", "{}: no paste path", k.file);
            composed.push(with_cb_ids(&src));
        }
        for c in composed {
            assert!(!c.contains(CB_IDS_MARKER), "{}: the marker left", k.file);
            for cb in k.cbs {
                let decl = format!("constexpr uint32_t {} = {};", cb.name, cb.id);
                assert!(c.contains(&decl), "{}: no `{decl}`", k.file);
            }
        }
    }
}

/// The worker knows no CB id, bound or word layout of its own: every program comes laid out
/// (`lower.rs`, from the registry and the plan), so the worker's source names no CB and no
/// table CB by number, and takes nothing from the runtime but the protocol's schema.
#[test]
fn the_worker_knows_no_cb_ids() {
    let py = super::worker::WORKER_SOURCE;
    for named in ["cb_", "CB[", "TABLE_CB", "MAX_ARGS", "TABLE_WORDS", "pair("] {
        assert!(!py.contains(named), "the worker names `{named}`");
    }
    let full = super::worker::worker_source();
    assert!(full.starts_with("PROTOCOL_JSON = r'''{"), "{full:.40}");
    assert_eq!(
        full.matches("r'''").count(),
        1,
        "the schema alone goes first"
    );
}

/// The kernels of one program agree on the CBs they pass between them (a reader fills what the
/// compute kernel reads, the compute kernel fills what the writer drains): the worker sizes
/// each CB once, under the id these share.
#[test]
fn the_kernels_of_one_program_agree_on_their_shared_cbs() {
    use super::registry::cb_id;
    let same = |a: (&str, &str), b: (&str, &str)| {
        assert_eq!(
            cb_id(a.0, a.1),
            cb_id(b.0, b.1),
            "{a:?} and {b:?} are one CB"
        );
    };
    // The matmul: reader_share → matmul_share → writer_partials.
    same(
        ("reader_share.cpp", "cb_act"),
        ("matmul_share.cpp", "cb_act"),
    );
    same(("reader_share.cpp", "cb_w"), ("matmul_share.cpp", "cb_w"));
    same(
        ("matmul_share.cpp", "cb_out"),
        ("writer_partials.cpp", "cb_out"),
    );
    // The row kernels: reader_rows → layernorm_rows / softmax_rows → writer_tiles.
    for (x, y) in [("cb_x", "cb_y"), ("cb_s", "cb_p")] {
        let compute = if x == "cb_x" {
            "layernorm_rows.cpp"
        } else {
            "softmax_rows.cpp"
        };
        same(("reader_rows.cpp", "cb_x"), (compute, x));
        same(("reader_rows.cpp", "cb_scaler"), (compute, "cb_scaler"));
        same((compute, y), ("writer_tiles.cpp", "cb_out"));
    }
    same(("reader_rows.cpp", "cb_g"), ("layernorm_rows.cpp", "cb_g"));
    same(("reader_rows.cpp", "cb_b"), ("layernorm_rows.cpp", "cb_b"));
    // The streaming norm: reader_rows_stream → norm_stream → writer_tiles, in the worker's row
    // program, which sizes x and the scaler by reader_rows.cpp's ids.
    for cb in ["cb_x", "cb_scaler", "cb_g", "cb_b"] {
        same(("reader_rows_stream.cpp", cb), ("norm_stream.cpp", cb));
        same(("reader_rows_stream.cpp", cb), ("reader_rows.cpp", cb));
    }
    same(("norm_stream.cpp", "cb_y"), ("writer_tiles.cpp", "cb_out"));
    // A matmul's end: reader_finish → bias_act_rows → writer_runs.
    for cb in ["cb_x", "cb_bias", "cb_res"] {
        same(("reader_finish.cpp", cb), ("bias_act_rows.cpp", cb));
    }
    same(("bias_act_rows.cpp", "cb_y"), ("writer_runs.cpp", "cb_out"));
    // Attention: reader_attention → attention_head → writer_merge_heads.
    for cb in ["cb_q", "cb_scaler", "cb_k", "cb_v", "cb_mask", "cb_diag"] {
        same(("reader_attention.cpp", cb), ("attention_head.cpp", cb));
    }
    same(
        ("attention_head.cpp", "cb_o"),
        ("writer_merge_heads.cpp", "cb_o"),
    );
    // The element-wise op: reader_tiles → eltwise_sfpu → writer_tiles.
    same(
        ("reader_tiles.cpp", "cb_in"),
        ("sfpu/eltwise_sfpu.cpp", "cb_in"),
    );
    same(
        ("sfpu/eltwise_sfpu.cpp", "cb_out"),
        ("writer_tiles.cpp", "cb_out"),
    );
}
