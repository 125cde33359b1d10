//! The protocol's types against its schema (`protocol.json`, what the worker checks every
//! message with): every message the types make passes the schema's check, which is
//! `ttnn_worker.py`'s `check` written again here, and every key the schema declares is made by
//! some message (so the schema is neither looser nor staler than the types); requests round
//! trip; answers with a key too many or too few are refused on this side.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::{Value, json};
use tt_blackhole::plan::program::StepCores;

use super::graph_steps::*;
use super::protocol::*;
use super::worker::{TtnnWorker, WorkerConfig, WorkerError};

fn schema() -> Value {
    serde_json::from_str(SCHEMA).expect("protocol.json parses")
}

/// `ttnn_worker.py`'s `check`, recording each (object type, key) met in `seen`.
fn check(s: &Value, v: &Value, ty: &Value, name: &str, seen: &mut BTreeSet<(String, String)>) {
    let fail = |why: &str| -> ! { panic!("{name}: {why}: {v}") };
    match ty {
        Value::String(p) if ["str", "bool", "int", "num"].contains(&p.as_str()) => {
            let ok = match p.as_str() {
                "str" => v.is_string(),
                "bool" => v.is_boolean(),
                "int" => v.is_u64() || v.is_i64(),
                _ => v.is_number(),
            };
            if !ok {
                fail(&format!("not a {p}"));
            }
        }
        Value::String(t) => check(s, v, &s["types"][t], t, seen),
        Value::Array(elem) => {
            let Some(items) = v.as_array() else {
                fail("not a list");
            };
            for x in items {
                check(s, x, &elem[0], &format!("{name}[]"), seen);
            }
        }
        Value::Object(o) if o.contains_key("tuple") => {
            let (Some(items), Some(types)) = (v.as_array(), o["tuple"].as_array()) else {
                fail("not a tuple");
            };
            assert_eq!(items.len(), types.len(), "{name}: tuple of {v}");
            for (x, t) in items.iter().zip(types) {
                check(s, x, t, &format!("{name}[]"), seen);
            }
        }
        Value::Object(o) if o.contains_key("enum") => {
            if !o["enum"].as_array().is_some_and(|e| e.contains(v)) {
                fail("not in the enum");
            }
        }
        Value::Object(o) if o.contains_key("map") => {
            let Some(m) = v.as_object() else {
                fail("not a map");
            };
            for x in m.values() {
                check(s, x, &o["map"], &format!("{name}[]"), seen);
            }
        }
        Value::Object(o) if o.contains_key("@tag") => {
            let tag = o["@tag"].as_str().unwrap_or_default();
            let kind = v[tag].as_str().unwrap_or_else(|| fail("no tag"));
            let mut rest = v.as_object().cloned().unwrap_or_default();
            rest.remove(tag);
            let variant = o.get(kind).unwrap_or_else(|| fail("unknown variant"));
            check(s, &Value::Object(rest), variant, name, seen);
        }
        Value::Object(fields) => {
            let Some(obj) = v.as_object() else {
                fail("not an object");
            };
            for k in obj.keys() {
                if !fields.contains_key(k) && !fields.contains_key(&format!("{k}?")) {
                    fail(&format!("unknown key `{k}`"));
                }
            }
            for (spelt, t) in fields {
                let k = spelt.trim_end_matches('?');
                match obj.get(k) {
                    Some(x) => {
                        seen.insert((name.to_string(), k.to_string()));
                        check(s, x, t, &format!("{name}.{k}"), seen);
                    }
                    None if spelt.ends_with('?') => {}
                    None => fail(&format!("no key `{k}`")),
                }
            }
        }
        other => panic!("{name}: schema type {other}"),
    }
}

/// Every (object type, key) the schema declares, named as [`check`] names them.
fn declared(ty: &Value, name: &str, out: &mut BTreeSet<(String, String)>) {
    match ty {
        Value::Array(elem) => declared(&elem[0], &format!("{name}[]"), out),
        Value::Object(o) if o.contains_key("tuple") => {
            for t in o["tuple"].as_array().into_iter().flatten() {
                declared(t, &format!("{name}[]"), out);
            }
        }
        Value::Object(o) if o.contains_key("map") => declared(&o["map"], &format!("{name}[]"), out),
        Value::Object(o) if o.contains_key("enum") || o.contains_key("@tag") => {}
        Value::Object(fields) => {
            for (spelt, t) in fields {
                let k = spelt.trim_end_matches('?');
                out.insert((name.to_string(), k.to_string()));
                declared(t, &format!("{name}.{k}"), out);
            }
        }
        _ => {}
    }
}

fn kernels() -> KernelSet {
    KernelSet {
        reader: "r".into(),
        compute: "c".into(),
        writer: "w".into(),
    }
}

fn spec(real: Option<[usize; 2]>) -> TensorSpec {
    TensorSpec {
        name: "t/x0".into(),
        rows: 32,
        cols: 64,
        dtype: ActDtype::F32,
        real,
        at: None,
    }
}

fn shared() -> MatmulShared {
    MatmulShared {
        arena: "arena".into(),
        weight_dtype: "bfp8_b".into(),
        weight_page: 1088,
        math_fidelity: "LoFi".into(),
        kernels: kernels(),
    }
}

fn job() -> MatmulJob {
    MatmulJob {
        m: 17,
        mt: 1,
        k: 64,
        kt: 2,
        nt: 2,
        k_split: 1,
        units: vec![MatmulUnit {
            x: 1,
            y: 2,
            first_tile: 3,
            n_start: 0,
            n_count: 2,
            k_start: 0,
            k_count: 2,
            piece: 0,
        }],
        cbs: MatmulCbs {
            act: 2,
            weights: 2,
            out: 2,
        },
        act: Some("t/h".into()),
        out: Some("t/partials/0/0".into()),
    }
}

fn rows_step() -> RowsStep {
    RowsStep {
        x: "t/x0".into(),
        scaler: "c/scaler".into(),
        g: "c/ones".into(),
        b: "c/zeros".into(),
        b_col: 0,
        vec_len: 64,
        out: "t/h".into(),
        out_f32: false,
        wt: 2,
        row_tiles: 1,
        vec_tiles: 2,
        label: "ln_plain".into(),
        work_cbs: vec![(2, 2), (6, 1)],
        unpack_to_dest: vec![0],
        cores: 8,
        group: "ln_plain".into(),
        kernels: kernels(),
    }
}

fn attention_step() -> AttentionStep {
    AttentionStep {
        q: "t/q".into(),
        k: "t/k".into(),
        v: "t/v".into(),
        scaler: "c/scaler".into(),
        mask: "o/mask/self".into(),
        out: "t/a".into(),
        heads: 2,
        kv_heads: 1,
        causal: true,
        mp: 32,
        np: 32,
        hd: 32,
        cores: 8,
        group: "attention/self".into(),
        kernels: kernels(),
    }
}

fn matmul_end(before: Option<BeforeStep>) -> MatmulEndStep {
    MatmulEndStep {
        before,
        matmul: MatmulGroup {
            shared: shared(),
            jobs: vec![job()],
        },
        finish: FinishStep {
            jobs: vec![FinishJob {
                x: "t/partials/0/0".into(),
                bias: "c/bias/0/Q".into(),
                out: "t/q".into(),
                mt: 1,
                nt: 2,
                k_split: 1,
                res: Some("t/x0".into()),
                out_rows: Some(2),
                out_row0: 1,
            }],
            out_f32: true,
            unit_tiles: 16,
            group: "finish_residual/f32".into(),
            kernels: kernels(),
            cut: None,
        },
        label: "matmul Q".into(),
    }
}

fn graph() -> Graph {
    let cores = StepCores {
        before: vec![(0, 1)],
        matmul: vec![(1, 2)],
        end: vec![(3, 4)],
        end_cut: 1,
    };
    let step_cores = |before| StepCores {
        before: vec![before],
        ..cores.clone()
    };
    // Every kind of step the builder makes, lowered to the programs the worker gets.
    let steps = [
        GraphStep::Rows(rows_step()),
        GraphStep::Attention(attention_step()),
        GraphStep::Relayout(RelayoutStep {
            src: "t/q".into(),
            dst: "t/a".into(),
            rows: 1,
            src_w: 2,
            dst_w: 2,
            dtype: ActDtype::Bf16,
            progs: vec![vec![1; 10]],
            span: 2,
            cores: 8,
            kernel: "relayout".into(),
            label: Some("copy".into()),
        }),
        GraphStep::Finish(FinishStep {
            cut: Some(4),
            ..matmul_end(None).finish
        }),
        GraphStep::Chain(ChainStep {
            steps: vec![
                matmul_end(Some(BeforeStep::Rows(rows_step()))),
                matmul_end(Some(BeforeStep::Attention(attention_step()))),
            ],
            cores: vec![step_cores((0, 1)), step_cores((0, 2))],
            groups: vec![("ln_plain".into(), vec![(0, 1)])],
            label: "2 steps: a … b".into(),
        }),
    ];
    Graph {
        inputs: vec![spec(Some([17, 64])), spec(None)],
        programs: super::lower::lower(&steps, [13, 10]).expect("the sample steps lower"),
        outputs: vec![("t/x2".into(), 17, 64)],
        free: vec!["t/h".into()],
        sources: [("r".to_string(), "// reader".to_string())].into(),
        keep: Some("step/0".into()),
    }
}

fn run() -> GraphRun {
    GraphRun {
        programs: 3,
        steps: 9,
        chains: vec![ChainRun {
            steps: 2,
            phases: vec![("rows".into(), 8), ("matmul".into(), 20)],
        }],
        by_label: [("ln_plain".to_string(), (1, 0.5, 0.5))].into(),
        total_ms: 3.0,
        host_ms: 1.0,
    }
}

/// One sample of every request, as its wire header, and the answer of the same op.
fn samples() -> Vec<(Op, Value, Value)> {
    fn one<R: WorkerOp>(r: R, answer: impl Serialize) -> (Op, Value, Value) {
        let h = header(&r).expect("a request serialises");
        (
            R::OP,
            h,
            serde_json::to_value(answer).expect("an answer serialises"),
        )
    }
    let info = json!({"arch": "Arch.BLACKHOLE", "grid": [13, 10], "simulator": true,
                      "dram_banks": 8, "open_ms": 1.5});
    let info: super::backend::DeviceInfo = serde_json::from_value(info).expect("DeviceInfo");
    let named = || Named {
        name: "arena".into(),
    };
    vec![
        one(
            Open {
                device: "sim".into(),
            },
            info,
        ),
        one(
            Upload {
                name: "arena".into(),
                page_bytes: 1088,
                pages: 4,
            },
            Uploaded {
                address: 1,
                page_bytes: 1088,
                pages: 4,
                ms: 1.0,
            },
        ),
        one(Readback(named()), Timed { ms: 1.0 }),
        one(Free(named()), Empty {}),
        one(
            Put {
                tensors: vec![spec(None)],
            },
            Timed { ms: 1.0 },
        ),
        one(graph(), run()),
        one(
            Replay {
                name: "step/0".into(),
                // A row put alone at its place (the head's state).
                inputs: vec![TensorSpec {
                    at: Some([2, 0]),
                    ..spec(Some([1, 64]))
                }],
            },
            Replayed {
                replayed: true,
                run: Some(run()),
            },
        ),
        one(Close {}, Empty {}),
    ]
}

/// Every message the types make passes the schema the worker checks, and every key the schema
/// declares is one some message makes.
#[test]
fn the_schema_describes_the_messages_the_types_make() {
    let s = schema();
    let (mut seen, mut want) = (BTreeSet::new(), BTreeSet::new());
    let samples = samples();
    let ops: BTreeSet<&str> = samples.iter().map(|(op, ..)| op.name()).collect();
    let all: BTreeSet<&str> = Op::ALL.iter().map(|op| op.name()).collect();
    assert_eq!(ops, all, "a sample of every op");
    for side in ["requests", "answers"] {
        let listed: BTreeSet<&str> = s[side]
            .as_object()
            .expect("a table of ops")
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(listed, all, "the schema's {side}");
    }
    for (op, h, answer) in &samples {
        let mut body = h.as_object().cloned().expect("a header is an object");
        assert_eq!(body.remove("op"), Some(json!(op.name())));
        let (rq, an) = (&s["requests"][op.name()], &s["answers"][op.name()]);
        check(
            &s,
            &Value::Object(body),
            rq,
            &format!("request/{}", op.name()),
            &mut seen,
        );
        check(&s, answer, an, &format!("answer/{}", op.name()), &mut seen);
        declared(rq, &format!("request/{}", op.name()), &mut want);
        declared(an, &format!("answer/{}", op.name()), &mut want);
    }
    for (name, ty) in s["types"].as_object().expect("types") {
        declared(ty, name, &mut want);
    }
    let unmade: Vec<_> = want.difference(&seen).collect();
    assert!(
        unmade.is_empty(),
        "keys the schema declares and no message makes: {unmade:?}"
    );
}

/// The schema's check refuses what the worker must refuse: an unknown key, a missing one, a
/// value of another type, an unknown variant.
#[test]
#[should_panic(expected = "unknown key `colour`")]
fn the_check_refuses_an_unknown_key() {
    let s = schema();
    let put =
        json!({"tensors": [{"name": "x", "rows": 32, "cols": 32, "dtype": "f32", "colour": 1}]});
    check(
        &s,
        &put,
        &s["requests"]["put"],
        "request/put",
        &mut BTreeSet::new(),
    );
}

/// Requests read back as they were sent (the worker's keys are the types' keys, both ways).
#[test]
fn requests_round_trip() {
    fn back<R: WorkerOp + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(r: R) {
        let mut h = header(&r).expect("serialises");
        h.as_object_mut().map(|o| o.remove("op"));
        // As the bytes go on the wire.
        let again: R = serde_json::from_str(&h.to_string()).expect("reads back");
        assert_eq!(again, r);
    }
    back(graph());
    back(Replay {
        name: "step/0".into(),
        inputs: vec![spec(Some([1, 2]))],
    });
}

/// Answers parse with their envelope taken off; a key too many or too few is an error that
/// names it.
#[test]
fn answers_with_a_key_too_many_or_too_few_are_refused() {
    let ok: Reply<Timed> =
        parse_reply(json!({"ok": true, "table_bytes": 4, "request_bytes": 9, "ms": 1.5}))
            .expect("parses");
    assert_eq!(
        (ok.answer.ms, ok.table_bytes, ok.request_bytes),
        (1.5, 4, 9)
    );
    let extra = parse_reply::<Timed>(
        json!({"ok": true, "table_bytes": 0, "request_bytes": 0, "ms": 1.0, "msec": 1.0}),
    )
    .unwrap_err();
    assert!(extra.contains("unknown field `msec`"), "{extra}");
    let short = parse_reply::<GraphRun>(json!({"ok": true, "table_bytes": 0, "request_bytes": 0,
        "programs": 1, "steps": 1, "chains": [], "by_label": {}, "total_ms": 1.0}))
    .unwrap_err();
    assert!(short.contains("missing field `host_ms`"), "{short}");
    let bare = parse_reply::<Empty>(json!({"ok": true})).unwrap_err();
    assert!(bare.contains("table_bytes"), "{bare}");
}

/// A worker whose answer does not match the protocol fails the typed call loudly (a protocol
/// error naming the op and the field), and that is fatal: the worker no longer speaks it.
#[test]
fn a_typed_call_refuses_an_answer_the_protocol_lacks() {
    const ODD_WORKER: &str = r#"
import json, struct, sys
inp, out = sys.stdin.buffer, sys.stdout.buffer
def exact(n):
    b = b""
    while len(b) < n:
        c = inp.read(n - len(b))
        if not c:
            sys.exit(0)
        b += c
    return b
while True:
    h = json.loads(exact(struct.unpack("<I", exact(4))[0]))
    exact(struct.unpack("<Q", exact(8))[0])
    a = json.dumps({"ok": True, "table_bytes": 0, "request_bytes": 1, "msec": 1.0}).encode()
    out.write(struct.pack("<I", len(a)) + a + struct.pack("<Q", 0))
    out.flush()
"#;
    let config = WorkerConfig::new(super::tests::system_python());
    let mut w = TtnnWorker::start_program(&config, ODD_WORKER).expect("start");
    let put = Put {
        tensors: vec![spec(None)],
    };
    let err = w.call(&put, &[]).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, WorkerError::Protocol(_)), "{text}");
    assert!(text.contains("`put`") && text.contains("msec"), "{text}");
    assert!(err.is_fatal());
    let fault = err.into_fault("put", summary(&header(&put).unwrap()));
    assert_eq!(fault.kind, tt_blackhole::device::FaultKind::Protocol);
    assert!(fault.request.contains("t/x0"), "{}", fault.request);
}

/// An error keeps the request that failed, kernel sources shortened to their length, the
/// whole bounded.
#[test]
fn a_request_summary_shortens_kernel_sources() {
    let mut g = Graph {
        programs: Vec::new(),
        ..graph()
    };
    g.sources.insert("r".into(), "x".repeat(5000));
    let s = summary(&header(&g).unwrap());
    assert!(s.contains("\"r\":\"<5000 chars>\""), "{s}");
    assert!(s.contains("\"op\":\"graph\""), "{s}");
    let long = summary(&header(&graph()).unwrap());
    assert!(long.len() <= 2010 && long.ends_with(" …"), "{}", long.len());
}

/// A LayerNorm's L1 on each of its cores, as the worker sizes its CBs: the DiT's width fits
/// a core, the projector's 4608 unshuffled features do not (the graph refuses it by name).
#[test]
fn a_norm_s_l1_grows_with_its_row() {
    let norm = |wt: usize| RowsStep {
        wt,
        vec_tiles: wt,
        vec_len: 32 * wt,
        // The LayerNorm's CBs as the graph builder asks for them.
        work_cbs: super::graph_norms::layernorm_work_cbs(wt)
            .into_iter()
            .collect(),
        ..rows_step()
    };
    let l1 = tt_blackhole::plan::L1_BUDGET;
    // x, the scaler, 6 rows' and 2 single tiles of fp32, two bf16 output tiles.
    assert_eq!(norm(48).l1_bytes(), (6 * 48 + 1 + 2) * 4096 + 2 * 2048);
    assert!(norm(48).l1_bytes() <= l1, "the DiT's 1536 columns fit");
    assert!(norm(144).l1_bytes() > l1, "the projector's 4608 do not");
    let f32_out = RowsStep {
        out_f32: true,
        ..norm(36)
    };
    assert_eq!(f32_out.l1_bytes() - norm(36).l1_bytes(), 2 * 2048);
}
