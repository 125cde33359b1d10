"""The device side of gr00t-megakernel's `device` feature: a long-lived worker that owns the Tenstorrent device
(a p150a, or the ttsim simulator when TT_METAL_SIMULATOR is set) through ttnn's Python API. The Rust
runtime starts it (`python3 -c <this file>`) and speaks a small framed protocol over its stdin/stdout:

    frame = u32 LE header length | header JSON | u64 LE payload length | payload bytes

Requests carry an "op"; each answer is one frame with {"ok": true, ...} or {"ok": false, "kind": "schema" |
"op", "error": "..."}. Every request read and every answer written is checked against the protocol's schema
(PROTOCOL_JSON, protocol.json, the same messages as the Rust side's protocol.rs types): a key missing, unknown
or of another type is a "schema" failure naming it, before anything runs.
Nothing here decides anything about the model: which tiles, which cores, which words and CBs all come from
the Rust side (tt_blackhole's plan, lowered to programs by lower.rs); the kernels are the repo's C++ sources,
sent as SOURCE_CODE.
"""
import json
import os
import struct
import sys
import time
import traceback

# The protocol owns the real stdout; tt-metal's and loguru's prints go to stderr.
_proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
_proto_in = sys.stdin.buffer

import numpy as np  # noqa: E402
import ttnn  # noqa: E402

ACT_DTYPES = {"bf16": ttnn.bfloat16, "f32": ttnn.float32}
# A CB's page format as the Rust side names it (program.rs, CbFormat).
FORMATS = {"f32": ttnn.float32, "bf16": ttnn.bfloat16, "bfp8_b": ttnn.bfloat8_b, "bfp4_b": ttnn.bfloat4_b,
           "uint32": ttnn.uint32}
TABLES_KEPT = 256  # task tables kept on the device for the programs that use them again


PROTOCOL = json.loads(PROTOCOL_JSON)
PRIMITIVES = {"str": (str,), "bool": (bool,), "int": (int,), "num": (int, float)}


class SchemaError(Exception):
    pass


def check(value, ty, at):
    """value against the schema type ty (protocol.json's type language); raises SchemaError naming where."""
    if isinstance(ty, str) and ty in PRIMITIVES:
        if not isinstance(value, PRIMITIVES[ty]) or (ty != "bool" and isinstance(value, bool)):
            raise SchemaError(f"{at}: {type(value).__name__} {value!r:.40}, the schema wants {ty}")
    elif isinstance(ty, str):
        check(value, PROTOCOL["types"][ty], at)
    elif ty == ["int"]:  # a kernel's words: many, checked at once
        if not isinstance(value, list) or not all(type(v) is int for v in value):
            raise SchemaError(f"{at}: {type(value).__name__}, the schema wants a list of ints")
    elif isinstance(ty, list) or "tuple" in ty:
        items = ty if isinstance(ty, list) else ty["tuple"]
        if not isinstance(value, (list, tuple)) or ("tuple" in ty and len(value) != len(items)):
            raise SchemaError(f"{at}: {type(value).__name__}, the schema wants a list {ty}")
        for i, v in enumerate(value):
            check(v, items[0] if isinstance(ty, list) else items[i], f"{at}[{i}]")
    elif "enum" in ty:
        if value not in ty["enum"]:
            raise SchemaError(f"{at}: {value!r}, the schema wants one of {ty['enum']}")
    elif not isinstance(value, dict):
        raise SchemaError(f"{at}: {type(value).__name__}, the schema wants an object")
    elif "map" in ty:
        for k, v in value.items():
            check(v, ty["map"], f"{at}[{k!r}]")
    elif "@tag" in ty:
        tag = ty["@tag"]
        kind = value.get(tag)
        if kind == "@tag" or kind not in ty:
            raise SchemaError(f"{at}: {tag} {kind!r}, the schema wants one of {[k for k in ty if k != '@tag']}")
        check({k: v for k, v in value.items() if k != tag}, ty[kind], f"{at}<{kind}>")
    else:
        fields = {k.rstrip("?"): k for k in ty}
        for k in value:
            if k not in fields:
                raise SchemaError(f"{at}: unknown key {k!r} (the schema has {sorted(fields)})")
        for k, spelt in fields.items():
            if k in value:
                check(value[k], ty[spelt], f"{at}.{k}")
            elif not spelt.endswith("?"):
                raise SchemaError(f"{at}: no key {k!r}")


def check_request(h):
    op = h.get("op")
    if op not in PROTOCOL["requests"]:
        raise SchemaError(f"request: op {op!r}, the schema has {sorted(PROTOCOL['requests'])}")
    check({k: v for k, v in h.items() if k != "op"}, PROTOCOL["requests"][op], f"request `{op}`")


def read_exact(n):
    buf = bytearray()
    while len(buf) < n:
        chunk = _proto_in.read(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf  # writable: numpy views of it can be handed to ttnn (read-only arrays are refused)


def read_frame():
    """A request: its header, its payload, and the header's bytes (what building the request cost to send)."""
    (hlen,) = struct.unpack("<I", read_exact(4))
    header = json.loads(read_exact(hlen))
    (plen,) = struct.unpack("<Q", read_exact(8))
    return header, read_exact(plen) if plen else bytearray(), hlen


def write_frame(header, payload=b""):
    h = json.dumps(header).encode()
    _proto_out.write(struct.pack("<I", len(h)) + h + struct.pack("<Q", len(payload)))
    if payload:
        _proto_out.write(payload)


class Worker(GraphOps):
    def __init__(self):
        self.dev = None
        self.buffers = {}  # name -> device tensor holding raw pages
        self.retired = []  # tensors replaced under their names while a program being built may use them
        self.tables = {}  # task tables on the device, by their words (ttnn_graph.py), the newest last
        self.table_bytes = 0  # the bytes of task tables written to the device so far
        self.kept = {}  # graphs kept for op_replay, by name (ttnn_graph.py)
        self.recording = None  # the launches of the graph being kept, while it runs
        self.held = []  # tensors replaced under their names while a graph was being kept (its launches use them)
        self.label, self.chain_steps = "", 0  # the graph step running: its label, a chain's steps (for replays)
        self.launch_s = 0.0  # seconds spent in launched programs so far (the rest of an op is the host's)

    def op_open(self, h, _):
        sim = os.environ.get("TT_METAL_SIMULATOR")
        if h["device"] == "sim" and not sim:
            raise RuntimeError("GR00T_MK_DEVICE=sim but TT_METAL_SIMULATOR is not set (source the simulator's env.sh)")
        if h["device"] == "p150a" and sim:
            raise RuntimeError("GR00T_MK_DEVICE=p150a but TT_METAL_SIMULATOR is set: unset it to use the card")
        if ttnn.GetNumAvailableDevices() < 1:
            raise RuntimeError("no Tenstorrent device found")
        t = time.time()
        self.dev = ttnn.open_device(device_id=0)
        grid = self.dev.compute_with_storage_grid_size()
        return {"arch": str(self.dev.arch()), "grid": [grid.x, grid.y], "simulator": bool(sim),
                "dram_banks": self.dev.dram_grid_size().x * self.dev.dram_grid_size().y,
                "open_ms": (time.time() - t) * 1e3}, b""

    def op_upload(self, h, payload):
        """Raw pages as they are (no conversion): a uint8 ROW_MAJOR DRAM tensor with one page per row,
        interleaved page i -> bank i % banks, i.e. one arena tile per page."""
        page, pages = h["page_bytes"], h["pages"]
        if len(payload) != page * pages:
            raise RuntimeError(f"upload {h['name']}: {len(payload)} bytes, want {pages} x {page}")
        t = time.time()
        host = ttnn.Tensor(np.frombuffer(payload, dtype=np.uint8).reshape(pages, page), ttnn.uint8, None,
                           ttnn.ROW_MAJOR_LAYOUT)
        dev = ttnn.to_device(host, self.dev, memory_config=ttnn.DRAM_MEMORY_CONFIG)
        if dev.buffer_page_size() != page:
            raise RuntimeError(f"device buffer page is {dev.buffer_page_size()} B, want {page}")
        self.buffers[h["name"]] = dev
        return {"address": dev.buffer_address(), "page_bytes": dev.buffer_page_size(),
                "pages": dev.buffer_num_pages(), "ms": (time.time() - t) * 1e3}, b""

    def op_readback(self, h, _):
        t = time.time()
        data = ttnn.from_device(self.buffers[h["name"]]).to_numpy()
        return {"ms": (time.time() - t) * 1e3}, np.ascontiguousarray(data, dtype=np.uint8).tobytes()

    def op_free(self, h, _):
        b = self.buffers.pop(h["name"], None)
        if b is not None:
            ttnn.deallocate(b)
        return {}, b""

    def _launch(self, tensors, kernels, cbs, semaphores=()):
        """One program of these kernels and CBs over these device tensors, run to its end."""
        prog = ttnn.ProgramDescriptor(kernels=kernels, semaphores=list(semaphores), cbs=cbs)
        self._run(list(tensors.values()), prog)
        for t in self.retired:  # a graph being kept holds them: its recorded launches may name them
            if self.recording is not None:
                self.held.append(t)
            else:
                ttnn.deallocate(t)
        self.retired.clear()

    def op_close(self, h, _):
        if self.dev is not None:
            self._drop_kept()
            for b in list(self.buffers.values()) + list(self.tables.values()) + self.retired:
                ttnn.deallocate(b)
            self.buffers.clear()
            self.tables.clear()
            self.retired.clear()
            ttnn.close_device(self.dev)
            self.dev = None
        return {}, b""


def main():
    w = Worker()
    while True:
        try:
            h, payload, hlen = read_frame()
        except EOFError:
            break
        try:
            check_request(h)
            written = w.table_bytes
            ans, out = getattr(w, "op_" + h["op"])(h, payload)
            check(ans, PROTOCOL["answers"][h["op"]], f"answer to `{h['op']}`")
            # The task tables this op wrote to the device: host-to-device bytes like its payload.
            write_frame({"ok": True, **ans, "table_bytes": w.table_bytes - written, "request_bytes": hlen}, out)
        except SchemaError as e:  # a message the protocol does not have: refused, nothing else ran
            print(f"gr00t-worker: {e}", file=sys.stderr, flush=True)
            write_frame({"ok": False, "kind": "schema", "error": str(e)})
        except Exception as e:  # every failure goes back to the Rust side, located
            traceback.print_exc(file=sys.stderr)
            write_frame({"ok": False, "kind": "op", "error": f"{type(e).__name__}: {e}"})
        if w.recording is not None:  # a graph that failed while being kept is not kept
            w.recording = None
            w.retired += w.held
            w.held = []
        if h.get("op") == "close":
            break
    if w.dev is not None:
        w.op_close({}, b"")
    # The private working directory the runtime made for us (tt-metal's generated/ lands there):
    # removed here too, since a killed server never runs its own clean-up.
    own = os.environ.get("GR00T_TTNN_WORKDIR")
    if own and os.path.basename(own).startswith("gr00t-ttnn-worker-"):
        import shutil
        os.chdir("/")
        shutil.rmtree(own, ignore_errors=True)


main()
