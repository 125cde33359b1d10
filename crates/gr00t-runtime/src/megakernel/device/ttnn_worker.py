"""The device side of gr00t-runtime's `device` feature: a long-lived worker that owns the Tenstorrent device
(a p150a, or the ttsim simulator when TT_METAL_SIMULATOR is set) through ttnn's Python API. The Rust
runtime starts it (`python3 -c <this file>`) and speaks a small framed protocol over its stdin/stdout:

    frame = u32 LE header length | header JSON | u64 LE payload length | payload bytes

Requests carry an "op"; each answer is one frame with {"ok": true, ...} or {"ok": false, "error": "..."}.
Nothing here decides anything about the model: which tiles, which cores, which runtime args all come from
the Rust side (tt_blackhole's plan); the kernels are the repo's C++ sources, sent as SOURCE_CODE.
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

DTYPES = {"bfp8_b": ttnn.bfloat8_b, "bfp4_b": ttnn.bfloat4_b, "bf16": ttnn.bfloat16}


def read_exact(n):
    buf = bytearray()
    while len(buf) < n:
        chunk = _proto_in.read(n - len(buf))
        if not chunk:
            raise EOFError
        buf += chunk
    return buf  # writable: numpy views of it can be handed to ttnn (read-only arrays are refused)


def read_frame():
    (hlen,) = struct.unpack("<I", read_exact(4))
    header = json.loads(read_exact(hlen))
    (plen,) = struct.unpack("<Q", read_exact(8))
    return header, read_exact(plen) if plen else bytearray()


def write_frame(header, payload=b""):
    h = json.dumps(header).encode()
    _proto_out.write(struct.pack("<I", len(h)) + h + struct.pack("<Q", len(payload)))
    if payload:
        _proto_out.write(payload)


class Worker:
    def __init__(self):
        self.dev = None
        self.buffers = {}  # name -> device tensor holding raw pages

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

    def op_matmul(self, h, payload):
        """x [m, k] f32 (zero-padded to whole tiles, packed to bf16 tiles by ttnn, round to nearest even)
        times the arena weight, one program over the plan's compute cores; returns the fp32 partials
        [k_split, m_pad, n_tiles * 32]."""
        m, k, kt, nt, k_split = h["m"], h["k"], h["kt"], h["nt"], h["k_split"]
        mt = (m + 31) // 32
        x = np.zeros((mt * 32, kt * 32), dtype=np.float32)
        x[:m, :k] = np.frombuffer(payload, dtype=np.float32).reshape(m, k)
        arena = self.buffers[h["arena"]]
        t0 = time.time()
        act = ttnn.Tensor(x, ttnn.bfloat16, self.dev, ttnn.TILE_LAYOUT, ttnn.DRAM_MEMORY_CONFIG)
        out = ttnn.allocate_tensor_on_device(ttnn.Shape([k_split * mt * 32, nt * 32]), ttnn.float32,
                                             ttnn.TILE_LAYOUT, self.dev, ttnn.DRAM_MEMORY_CONFIG)
        units = h["units"]
        cores = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(u["x"], u["y"]), ttnn.CoreCoord(u["x"], u["y"]))
                                   for u in units])
        cb = h["cbs"]  # pages per CB, from the plan
        wdt = DTYPES[h["weight_dtype"]]
        cbs = [
            ttnn.CBDescriptor(total_size=cb["act"] * 2048, core_ranges=cores, format_descriptors=[
                ttnn.CBFormatDescriptor(buffer_index=0, data_format=ttnn.bfloat16, page_size=2048)]),
            ttnn.CBDescriptor(total_size=cb["weights"] * h["weight_page"], core_ranges=cores, format_descriptors=[
                ttnn.CBFormatDescriptor(buffer_index=1, data_format=wdt, page_size=h["weight_page"])]),
            ttnn.CBDescriptor(total_size=cb["out"] * 4096, core_ranges=cores, format_descriptors=[
                ttnn.CBFormatDescriptor(buffer_index=2, data_format=ttnn.float32, page_size=4096)]),
        ]
        rd, cp, wr = ttnn.RuntimeArgs(), ttnn.RuntimeArgs(), ttnn.RuntimeArgs()
        for u in units:
            x_, y_ = u["x"], u["y"]
            rd[x_][y_] = [act.buffer_address(), arena.buffer_address(), u["first_tile"], u["n_count"],
                          u["k_start"], u["k_count"], mt, kt]
            cp[x_][y_] = [u["n_count"], u["k_count"], mt]
            wr[x_][y_] = [out.buffer_address(), u["piece"], u["n_start"], u["n_count"], mt, nt]
        src = ttnn.KernelDescriptor.SourceType.SOURCE_CODE
        k = h["kernels"]
        reader = ttnn.KernelDescriptor(
            kernel_source=k["reader"], source_type=src, core_ranges=cores,
            compile_time_args=list(ttnn.TensorAccessorArgs(act).get_compile_time_args())
            + list(ttnn.TensorAccessorArgs(arena).get_compile_time_args()),
            runtime_args=rd, config=ttnn.ReaderConfigDescriptor())
        writer = ttnn.KernelDescriptor(
            kernel_source=k["writer"], source_type=src, core_ranges=cores,
            compile_time_args=list(ttnn.TensorAccessorArgs(out).get_compile_time_args()),
            runtime_args=wr, config=ttnn.WriterConfigDescriptor())
        compute = ttnn.KernelDescriptor(
            kernel_source=k["compute"], source_type=src, core_ranges=cores, compile_time_args=[],
            runtime_args=cp, config=ttnn.ComputeConfigDescriptor(
                math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True))
        prog = ttnn.ProgramDescriptor(kernels=[reader, writer, compute], semaphores=[], cbs=cbs)
        t1 = time.time()
        res = ttnn.generic_op([act, out], prog)
        ttnn.synchronize_device(self.dev)
        t2 = time.time()
        got = np.ascontiguousarray(ttnn.from_device(res).to_numpy(), dtype=np.float32)
        ttnn.deallocate(act)
        ttnn.deallocate(out)
        return {"program_ms": (t2 - t1) * 1e3, "total_ms": (time.time() - t0) * 1e3}, got.tobytes()

    def op_close(self, h, _):
        if self.dev is not None:
            for b in self.buffers.values():
                ttnn.deallocate(b)
            self.buffers.clear()
            ttnn.close_device(self.dev)
            self.dev = None
        return {}, b""


def main():
    w = Worker()
    while True:
        try:
            h, payload = read_frame()
        except EOFError:
            break
        try:
            ans, out = getattr(w, "op_" + h["op"])(h, payload)
            write_frame({"ok": True, **ans}, out)
        except Exception as e:  # every failure goes back to the Rust side, located
            traceback.print_exc(file=sys.stderr)
            write_frame({"ok": False, "error": f"{type(e).__name__}: {e}"})
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
