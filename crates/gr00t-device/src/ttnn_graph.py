"""The worker's graph ops (gr00t-megakernel `device` feature): named device tensors kept between requests
(`op_put`), a sequence of our programs over them (`op_graph`), kept and run again (`op_replay`). Each program
comes laid out by the Rust side (program.rs, lower.rs): its kernels, cores, words, CBs and semaphores; the
worker allocates, writes the tensors' addresses and the cores' NOC coordinates where the words say, writes
the task tables and launches. A mixin of ttnn_worker.py's `Worker`, split out to keep each file to one
purpose.

The runtime ships the worker as ONE source string (`python3 -c`): this file comes first, then
ttnn_worker.py (worker.rs, `WORKER_SOURCE`). So nothing here runs at load time but this class
statement: the names its methods use (np, ttnn, time, sys, ACT_DTYPES, FORMATS, TABLES_KEPT) are
ttnn_worker.py's globals, looked up when a request calls them, after that file's imports ran.
"""


class GraphOps:
    def _alloc(self, name, rows, cols, dtype):
        """A named device tensor [rows, cols] (TILE, DRAM): the one of that name when it is alike (a chain's
        phases reuse t/h, t/q, ... in order: a phase starts only once the one before it has ended, so a
        reuse never overtakes a read), else a new one; the one it replaces is released after the launch
        that may still use it (_launch)."""
        old = self.buffers.pop(name, None)
        if old is not None:
            if list(old.shape) == [rows, cols] and old.dtype == ACT_DTYPES[dtype]:
                self.buffers[name] = old
                return old
            self.retired.append(old)
        t = ttnn.allocate_tensor_on_device(ttnn.Shape([rows, cols]), ACT_DTYPES[dtype], ttnn.TILE_LAYOUT, self.dev,
                                           ttnn.DRAM_MEMORY_CONFIG)
        self.buffers[name] = t
        return t

    def _put(self, specs, payload, into=None):
        """Named device tensors from the payload, one [rows, cols] block per spec, in order, each as its tensor
        stores it: bf16 (2 bytes, already rounded by the host) or f32. A tensor of that name, shape and dtype is
        written in place, so it keeps its address: the programs and task tables that name it stay right (a kept
        graph's, a cached table). into: {name: tensor} to write instead of self.buffers' (op_replay's, which
        must all be written in place)."""
        at = 0
        for t in specs:
            r, c = t.get("real", (t["rows"], t["cols"]))  # the values sent; zero-padded here to whole tiles
            r0, c0 = t.get("at", (0, 0))  # where they start in the tensor
            n, width = r * c, 2 if t["dtype"] == "bf16" else 4
            if at + n * width > len(payload):
                raise RuntimeError(f"put {t['name']}: the payload ends at byte {len(payload)}, want {at + n * width}")
            if r0 + r > t["rows"] or c0 + c > t["cols"]:
                raise RuntimeError(f"put {t['name']}: [{r}, {c}] values at ({r0}, {c0}) overrun its "
                                   f"[{t['rows']}, {t['cols']}]")
            raw = np.frombuffer(payload, dtype=np.uint16 if width == 2 else np.float32, count=n, offset=at)
            vals = (raw.astype(np.uint32) << 16).view(np.float32) if width == 2 else raw
            x = np.zeros((t["rows"], t["cols"]), np.float32)
            x[r0:r0 + r, c0:c0 + c] = vals.reshape(r, c)
            at += n * width
            dtype = ACT_DTYPES[t["dtype"]]
            old = (into if into is not None else self.buffers).get(t["name"])
            if old is not None and old.is_allocated() and list(old.shape) == [t["rows"], t["cols"]] \
                    and old.dtype == dtype:
                ttnn.copy_host_to_device_tensor(ttnn.Tensor(x, dtype, None, ttnn.TILE_LAYOUT), old)
                continue
            if into is not None:
                raise RuntimeError(f"replay: input {t['name']} is no longer on the device as it was")
            if old is not None:
                ttnn.deallocate(self.buffers.pop(t["name"]))
            self.buffers[t["name"]] = ttnn.Tensor(x, dtype, self.dev, ttnn.TILE_LAYOUT, ttnn.DRAM_MEMORY_CONFIG)
        if at != len(payload):
            raise RuntimeError(f"put: {len(payload)} payload bytes, the specs take {at}")

    @staticmethod
    def _announce(steps, label):
        """Before each program of a graph or replay: its steps and label. The host gives the program the
        deadline it derives for that label (worker.rs, CHAIN_LINE; deadline.rs): a multiple of its last time."""
        print(f"gr00t-worker: program of {steps} steps: {label}", file=sys.stderr, flush=True)

    @staticmethod
    def _done(times, label, t1):
        """After each program: the host's deadline goes back to the exchange's; the program's time counted under
        its label in times ({label: (programs, total ms, slowest ms)}, the answer's "by_label")."""
        print("gr00t-worker: program done", file=sys.stderr, flush=True)
        ms = (time.time() - t1) * 1e3
        n, total, slowest = times.get(label, (0, 0.0, 0.0))
        times[label] = (n + 1, total + ms, max(slowest, ms))

    def _run(self, tensors, prog):
        """One program over these tensors, run to its end; recorded when a graph is being kept (op_graph's
        "keep"), with the label of the step it runs."""
        t = time.time()
        ttnn.generic_op(tensors, prog)
        ttnn.synchronize_device(self.dev)
        self.launch_s += time.time() - t
        if self.recording is not None:
            self.recording.append((self.label, self.chain_steps, tensors, prog))

    def _outputs(self, outputs):
        """The tensors named in outputs ([name, rows, cols]: the real rows and columns) read back as f32."""
        outs = []
        for o in outputs:
            host = ttnn.from_device(self.buffers[o[0]])
            if host.dtype != ttnn.float32:  # a bf16 host tensor's to_numpy is an object array: widen it (exact)
                host = ttnn.to_dtype(host, ttnn.float32)
            outs.append(np.ascontiguousarray(host.to_numpy()[:o[1], :o[2]], dtype=np.float32).tobytes())
        return b"".join(outs)

    def _drop_kept(self, name=None):
        """Forgets the kept graph of that name (every one without a name), releasing the tensors only it held:
        those its graph replaced under their names while it ran (its named ones the next graph reuses)."""
        for n in [name] if name is not None else list(self.kept):
            k = self.kept.pop(n, None)
            for t in k["held"] if k else ():
                ttnn.deallocate(t)

    def op_replay(self, h, payload):
        """The graph kept under h["name"] (op_graph's "keep") run again: h["inputs"] (the same specs it was
        kept with) written into its input tensors in place, its programs launched as recorded (the same
        descriptors, so nothing is rebuilt and no task table rewritten), its outputs read back. When no such
        graph is kept, its inputs differ, or a tensor it uses has been released since (another graph
        re-allocated it), nothing runs and the answer says {"replayed": false}: the Rust side then sends the
        whole graph. Answers "replayed" and, when it ran, "run": what op_graph answers."""
        t0, s0 = time.time(), self.launch_s
        k = self.kept.get(h["name"])
        if k is None or k["inputs"] != h["inputs"] or not all(
                t.is_allocated() for *_, ts, _ in k["launches"] for t in ts):
            self._drop_kept(h["name"])
            return {"replayed": False}, b""
        self._put(h["inputs"], payload, into=k["tensors"])
        times = {}
        for label, steps, tensors, prog in k["launches"]:
            t1 = time.time()
            self._announce(steps or 1, label)
            self._run(tensors, prog)
            self._done(times, label, t1)
        out = self._outputs(k["outputs"])
        total = (time.time() - t0) * 1e3
        return {"replayed": True, "run": {
            "programs": len(k["launches"]), "steps": k["steps"], "chains": k["chains"], "by_label": times,
            "total_ms": total, "host_ms": total - (self.launch_s - s0) * 1e3}}, out

    def op_put(self, h, payload):
        """Named device tensors kept for later graphs (constants, one observation's context): h["tensors"]
        [{name, rows, cols, dtype}], the payload their f32 values in order. No program runs."""
        t = time.time()
        self._put(h["tensors"], payload)
        return {"ms": (time.time() - t) * 1e3}, b""

    def op_graph(self, h, payload):
        """A sequence of our device programs over named device tensors, the activations never leaving the
        device between them: h["inputs"] are put first (as op_put), then each of h["programs"] is launched
        (_program), then h["outputs"] ([name, rows, cols]) are read back (f32, the real rows and columns, in
        order) and the names in h["free"] released. Every program is the Rust side's whole: its kernels, cores,
        words, CBs and semaphores (lower.rs); the worker fills in the addresses and NOC coordinates. With
        h["keep"] (a name) the graph is kept for op_replay: its launches recorded, its "free" names not released
        (the next step's graph reuses them). Answers the number of programs launched, the graph steps they
        ran, each chain's phases, per label its programs, total and slowest time, and the host's share of the
        time ("host_ms": building the programs, putting, reading back)."""
        t0, s0 = time.time(), self.launch_s
        self._put(h["inputs"], payload)
        keep = h.get("keep")
        if keep:  # recorded for op_replay; its step tensors stay until it is replaced
            self._drop_kept(keep)
            self.recording = []
        times, ran, chains = {}, 0, []
        for p in h["programs"]:
            t1 = time.time()
            self.label, self.chain_steps = p["label"], p["steps"]
            self._announce(p["steps"], p["label"])
            self._program(p, h["sources"])
            if p.get("phases"):
                chains.append({"steps": p["steps"], "phases": p["phases"]})
            ran += p["steps"]
            self._done(times, p["label"], t1)
        out = self._outputs(h["outputs"])
        if keep:
            self.kept[keep] = {"inputs": h["inputs"], "tensors": {t["name"]: self.buffers[t["name"]]
                                                                  for t in h["inputs"]},
                               "launches": self.recording, "outputs": h["outputs"], "steps": ran, "chains": chains,
                               "held": self.held}
            self.recording, self.held = None, []
        else:
            for name in h.get("free", []):
                t = self.buffers.pop(name, None)
                if t is not None:
                    ttnn.deallocate(t)
        total = (time.time() - t0) * 1e3
        return {"programs": len(h["programs"]), "steps": ran, "chains": chains, "by_label": times,
                "total_ms": total, "host_ms": total - (self.launch_s - s0) * 1e3}, out

    def _program(self, p, sources):
        """One program as the Rust side lowered it (program.rs), launched: its tensors resolved in order (a
        name's tensor, or one allocated under it: _alloc), each kernel on its cores with its words (a task
        table's rows, else its runtime args) where the addresses and NOC coordinates are written in, its CBs
        and semaphores."""
        ts = [self._alloc(t["name"], *t["alloc"]) if "alloc" in t else self.buffers[t["name"]]
              for t in p["tensors"]]
        used = {id(t): t for t in ts}
        kernels = []
        for k in p["kernels"]:
            cores = [tuple(c["core"]) for c in k["cores"]]
            words = [self._words(c, ts) for c in k["cores"]]
            ct = [a for i in k["accessors"] for a in ttnn.TensorAccessorArgs(ts[i]).get_compile_time_args()]
            ra = ttnn.RuntimeArgs()
            if "table_width" in k:
                table = self._table(words, k["table_width"])
                used[id(table)] = table
                ct = list(ttnn.TensorAccessorArgs(table).get_compile_time_args()) + ct
                for i, (x_, y_) in enumerate(cores):
                    ra[x_][y_] = [table.buffer_address(), i]
            else:
                for (x_, y_), w in zip(cores, words):
                    ra[x_][y_] = w.tolist()
            kernels.append(ttnn.KernelDescriptor(
                kernel_source=sources[k["source"]], source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE,
                core_ranges=self._ranges(cores), compile_time_args=ct + k["compile_args"], runtime_args=ra,
                config=self._config(k["config"])))
        cbs = [ttnn.CBDescriptor(total_size=c["page"] * c["pages"], core_ranges=self._ranges(c["cores"]),
                                 format_descriptors=[ttnn.CBFormatDescriptor(buffer_index=c["index"],
                                                                             data_format=FORMATS[c["format"]],
                                                                             page_size=c["page"])])
               for c in p["cbs"]]
        sems = [ttnn.SemaphoreDescriptor(id=i, core_type=ttnn.CoreType.WORKER, core_ranges=self._ranges(c),
                                         initial_value=0) for i, c in enumerate(p["semaphores"])]
        self._launch(used, kernels, cbs, semaphores=sems)

    def _words(self, c, ts):
        """A core's words with the tensors' DRAM addresses and the cores' NOC coordinates written in."""
        w = np.array(c["words"], dtype=np.uint32)
        for i, t in c.get("addrs", ()):
            w[i] = ts[t].buffer_address()
        for i, x_, y_ in c.get("nocs", ()):
            noc = self.dev.worker_core_from_logical_core(ttnn.CoreCoord(x_, y_))
            w[i] = noc.x | noc.y << 16
        return w

    def _table(self, words, width):
        """A task table: the cores' words as a uint32 ROW_MAJOR DRAM tensor, a row of `width` words a core. A
        table with the same words as one already on the device is that one (a denoising step's tables are the
        same step after step while the tensors' addresses are); the bytes written are counted in
        self.table_bytes."""
        rows = np.zeros((len(words), width), np.uint32)
        for i, w in enumerate(words):
            if len(w) > width:
                raise RuntimeError(f"task table: {len(w)} words in a row of {width}")
            rows[i, :len(w)] = w
        key = (rows.shape, rows.tobytes())
        table = self.tables.pop(key, None)
        if table is None:
            table = ttnn.Tensor(rows, ttnn.uint32, self.dev, ttnn.ROW_MAJOR_LAYOUT, ttnn.DRAM_MEMORY_CONFIG)
            self.table_bytes += rows.nbytes
        self.tables[key] = table  # the newest last: the oldest go first when there are too many
        while len(self.tables) > TABLES_KEPT:
            self.retired.append(self.tables.pop(next(iter(self.tables))))
        return table

    @staticmethod
    def _ranges(cores):
        return ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(*xy), ttnn.CoreCoord(*xy)) for xy in cores])

    @staticmethod
    def _config(c):
        if c["kind"] == "reader":
            return ttnn.ReaderConfigDescriptor()
        if c["kind"] == "writer":
            return ttnn.WriterConfigDescriptor()
        cfg = ttnn.ComputeConfigDescriptor(math_fidelity=getattr(ttnn.MathFidelity, c["fidelity"]),
                                           fp32_dest_acc_en=True)
        if c["unpack_to_dest"]:  # one entry per CB index
            cfg.unpack_to_dest_mode = [ttnn.UnpackToDestMode.UnpackToDestFp32 if i in c["unpack_to_dest"]
                                       else ttnn.UnpackToDestMode.Default for i in range(64)]
        return cfg
