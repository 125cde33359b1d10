"""The worker's graph ops (gr00t-megakernel `device` feature): named device tensors kept between requests
(`op_put`) and a whole denoising step as a sequence of our programs over them (`op_graph`), with the
relayout program the graph may still need. A mixin of ttnn_worker.py's `Worker`, split out to keep each
file to one purpose.

The runtime ships the worker as ONE source string (`python3 -c`): this file comes first, then
ttnn_worker.py (worker.rs, `WORKER_SOURCE`). So nothing here runs at load time but this class
statement: the names its methods use (np, ttnn, time, sys, ACT_DTYPES) are ttnn_worker.py's globals,
looked up when a request calls them, after that file's imports ran.
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
        device between them: h["inputs"] are put first (as op_put), then each of h["steps"] runs one
        program (kind "chain", "rows", "relayout" or "attention"; its output allocated under its name),
        then h["outputs"] ([name, rows, cols]) are read back (f32, the real rows and columns, in order) and the
        names in h["free"] released. A "chain" is matmul_end steps as ONE program, with the cores of every
        phase as the Rust plan packed them (tt_blackhole::plan::program): the worker runs what it is given.
        With h["keep"] (a name) the graph is kept for op_replay: its launches recorded, its "free" names not
        released (the next step's graph reuses them). Answers the number of programs launched, the number of
        matmul_end and other steps run, each chain's phases with their cores, per label its programs, total and
        slowest time, and the host's share of the time ("host_ms": building the programs, putting, reading
        back)."""
        t0, s0 = time.time(), self.launch_s
        self._put(h["inputs"], payload)
        b = self.buffers
        keep = h.get("keep")
        if keep:  # recorded for op_replay; its step tensors stay until it is replaced
            self._drop_kept(keep)
            self.recording = []
        times, launched, ran, chains = {}, 0, 0, []
        sources = h.get("sources", {})
        src = lambda p: {**p, "kernels": {r: sources.get(n, n) for r, n in p["kernels"].items()}} if p else None
        for st in h["steps"]:
            kind = st["kind"]
            if "kernels" in st:  # kernel sources are sent once per graph, named by its steps
                st = src(st)
            if "kernel" in st:
                st = {**st, "kernel": sources.get(st["kernel"], st["kernel"])}
            t1 = time.time()
            self.label, self.chain_steps = st.get("label", kind), len(st["steps"]) if kind == "chain" else 0
            self._announce(self.chain_steps or 1, self.label)
            if kind == "chain":  # matmul_end steps, one after the other: one program
                if len(st["cores"]) != len(st["steps"]):
                    raise RuntimeError(f"graph: a chain of {len(st['steps'])} steps with cores for {len(st['cores'])}")
                # The end's units are cut for the cores the plan cut them for (end_cut).
                items = [(src(s_["matmul"]), src(s_["finish"]), src(s_.get("before")))
                         for s_ in st["steps"]]
                cores = [tuple([tuple(xy) for xy in c[k]] for k in ("before", "matmul", "end")) + (c["end_cut"],)
                         for c in st["cores"]]
                phases = self._chain(items, cores, b)
                chains.append({"steps": len(st["steps"]), "phases": [[kind, n] for kind, n in phases]})
                ran += len(st["steps"])
            elif kind in ("rows", "attention", "finish"):  # a phase no matmul of the graph follows
                kernels, cbs, tensors, _ = self._group_parts(st, [self._task(st, b)])
                self._launch(tensors, kernels, cbs)
            elif kind == "relayout":
                out = self._alloc(st["dst"], st["rows"] * 32, st["dst_w"] * 32, st["dtype"])
                self._relayout_on_device(st, b[st["src"]], out)
            else:
                raise RuntimeError(f"graph: unknown step kind {kind!r}")
            launched += 1
            ran += 1 if kind != "chain" else 0
            self._done(times, self.label, t1)
        out = self._outputs(h["outputs"])
        if keep:
            self.kept[keep] = {"inputs": h["inputs"], "tensors": {t["name"]: b[t["name"]] for t in h["inputs"]},
                               "launches": self.recording, "outputs": h["outputs"], "steps": ran, "chains": chains,
                               "held": self.held}
            self.recording, self.held = None, []
        else:
            for name in h.get("free", []):
                t = b.pop(name, None)
                if t is not None:
                    ttnn.deallocate(t)
        total = (time.time() - t0) * 1e3
        return {"programs": launched, "steps": ran, "chains": chains, "by_label": times, "total_ms": total,
                "host_ms": total - (self.launch_s - s0) * 1e3}, out

    def _task(self, st, b):
        """A graph phase's task for its parts builder (ttnn_parts.py), its output allocated under its name: a
        LayerNorm ("rows"), an attention, or a matmul's end ("finish": it has "jobs")."""
        if "jobs" in st:
            dt_ = "f32" if st["out_f32"] else "bf16"
            return {"jobs": [(j, b[j["x"]], b[j["bias"]], self._alloc(j["out"], (j.get("out_rows") or j["mt"]) * 32, j["nt"] * 32, dt_),
                              b[j["res"]] if j.get("res") else None) for j in st["jobs"]], "cut": st.get("cut")}
        if st["kind"] == "attention":
            out = self._alloc(st["out"], st["mp"], -(-st["heads"] * st["hd"] // 32) * 32, "bf16")
            return {"tq": b[st["q"]], "tk": b[st["k"]], "tv": b[st["v"]], "ts": b[st["scaler"]], "tm": b[st["mask"]],
                    "out": out, "heads": st["heads"], "mp": st["mp"], "np": st["np"], "hd": st["hd"]}
        out = self._alloc(st["out"], st["row_tiles"] * 32, st["wt"] * 32, "f32" if st["out_f32"] else "bf16")
        return {"tx": b[st["x"]], "ts": b[st["scaler"]], "tg": b[st.get("g") or st["scaler"]],
                "tb": b[st.get("b") or st["scaler"]], "out": out, "wt": st["wt"], "row_tiles": st["row_tiles"],
                "vec_tiles": st["vec_tiles"], "b_col": st["b_col"], "vec_len": st["vec_len"]}

    def _group_parts(self, st, tasks):
        """The kernels of a group of phases alike (st: the first one's step) over their tasks: _finish_parts,
        _attention_parts or _rows_parts."""
        if "jobs" in st:
            return self._finish_parts(st, tasks)
        if st["kind"] == "attention":
            return self._attention_parts(st, tasks)
        return self._rows_parts(st, tasks, dict(st["work_cbs"]),
                                unpack_to_dest=tuple(st["unpack_to_dest"]), out_f32=st["out_f32"])

    def _noc(self, cores):
        """The NOC coordinates [(x, y)] of logical cores, as kernels address them."""
        return [(c.x, c.y) for c in (self.dev.worker_core_from_logical_core(ttnn.CoreCoord(*xy)) for xy in cores)]

    def _chain(self, items, plan, b):
        """matmul_end steps ((matmul, finish, before) each, with the plan's cores for them: (before's, the
        matmul's, the end's, the cores the end's units are cut for) per step) as ONE program: each step's
        independent matmuls (mm["jobs"]: each job's fp32 partials per K piece, allocated here under its "out")
        and their ends (the K pieces summed, the bias, bf16, GELU or the residual add), with the step that
        makes their activations (before: a LayerNorm or the attention) when given. The matmul kernels run on
        the plan's cores, every job of the chain in turn. The other phases run in groups (the plan's: each
        phase names its "group"), a group's cores running one set of kernels over its phases, a task each
        (ttnn_parts.py). Between consecutive phases a barrier on the device: each core of a phase, once its
        writes are acknowledged, increments semaphore 0 of every core of the next, whose reader waits until
        it holds the increments of every phase before one of its own so far. The phases form one line, each
        waiting for the whole of the one before, so a phase starts only when every earlier one has ended: a
        tensor a later phase rewrites (t/h, t/q, ...) has been read. Answers the line: (kind, cores) per
        phase."""
        line = []
        for (mm, end, before), (bc, mc, ec, cut) in zip(items, plan):
            if before is not None:
                line.append(("before", before, bc, None))
            line += [("matmul", mm, mc, None), ("end", end, ec, cut)]
        counts, groups, mm_jobs, mm_phases, mm_h = {}, {}, [], [], None
        for i, (kind, st, cores, cut) in enumerate(line):
            producers = len(line[i - 1][2]) if i > 0 else 0
            signal = self._noc(line[i + 1][2]) if i + 1 < len(line) else []
            if kind == "matmul":
                mm_h = mm_h or st
                mm_phases.append((producers, signal))
                # After the step before: its output, allocated there, is the matmuls' input.
                mm_jobs += [({**j, "arena": st["arena"]}, b[j["act"]],
                             self._alloc(j["out"], j["k_split"] * j["mt"] * 32, j["nt"] * 32, "f32"),
                             j["mt"], len(mm_phases) - 1) for j in st["jobs"]]
                continue
            waits = {}
            for xy in cores if producers else ():
                counts[xy] = waits[xy] = counts.get(xy, 0) + producers
            task = {**self._task(st, b), "cores": list(cores), "waits": waits, "signal": signal, "cut": cut}
            g = groups.setdefault(st["group"], {"st": st, "tasks": [], "planned": []})
            g["tasks"].append(task)
            g["planned"].append(list(cores))
        kernels, cbs, tensors = [], [], {}
        owner = {}
        for name, g in groups.items():
            for xy in {xy for c in g["planned"] for xy in c}:
                if owner.setdefault(xy, name) != name:
                    raise RuntimeError(f"chain: core {xy} is planned for groups {owner[xy]} and {name}")
            k_, c_, t_, used = self._group_parts(g["st"], g["tasks"])
            if used != g["planned"]:
                raise RuntimeError(f"chain: group {name} took {used}, planned {g['planned']}")
            kernels, cbs, tensors = kernels + k_, cbs + c_, {**tensors, **t_}
        k_, c_, t_, _ = self._matmul_parts(mm_h, mm_jobs, mm_phases)
        kernels, cbs, tensors = k_ + kernels, c_ + cbs, {**t_, **tensors}
        waiting = sorted({xy for _, _, cores, _ in line[1:] for xy in cores})
        ranges = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(*xy), ttnn.CoreCoord(*xy)) for xy in waiting])
        sem = ttnn.SemaphoreDescriptor(id=0, core_type=ttnn.CoreType.WORKER, core_ranges=ranges, initial_value=0)
        self._launch(tensors, kernels, cbs, semaphores=[sem])
        return [(kind if kind != "before" else st["kind"], len(cores)) for kind, st, cores, _ in line]

    def _relayout_on_device(self, st, src, dst):
        """Our relayout_tiles.cpp (data movement only) from src to dst: the dst tile rows shared over
        st["cores"] cores of the grid's first row, each core given every segment progression."""
        rows, dst_w, elem = st["rows"], st["dst_w"], 4 if st["dtype"] == "f32" else 2
        n_cores = max(1, min(st["cores"], rows, self.dev.compute_with_storage_grid_size().x))
        per, extra = divmod(rows, n_cores)
        flat = [w for p in st["progs"] for w in p]
        cores, rd, first = [], ttnn.RuntimeArgs(), 0
        for c in range(n_cores):
            count = per + (1 if c < extra else 0)
            rd[c][0] = [src.buffer_address(), dst.buffer_address(), st["src_w"], dst_w, elem, first, count,
                        len(st["progs"])] + flat
            cores.append(ttnn.CoreRange(ttnn.CoreCoord(c, 0), ttnn.CoreCoord(c, 0)))
            first += count
        cores = ttnn.CoreRangeSet(cores)
        page = 1024 * elem
        fmt = ACT_DTYPES[st["dtype"]]
        cbs = [ttnn.CBDescriptor(total_size=n * page, core_ranges=cores, format_descriptors=[
            ttnn.CBFormatDescriptor(buffer_index=i, data_format=fmt, page_size=page)])
            for i, n in ((CB["relayout_tiles"]["cb_dst"], (per + (1 if extra else 0)) * dst_w),
                         (CB["relayout_tiles"]["cb_src"], st["span"]))]
        acc = lambda t: list(ttnn.TensorAccessorArgs(t).get_compile_time_args())
        prog = ttnn.ProgramDescriptor(kernels=[
            ttnn.KernelDescriptor(kernel_source=st["kernel"], source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE,
                                  core_ranges=cores, compile_time_args=acc(src) + acc(dst), runtime_args=rd,
                                  config=ttnn.ReaderConfigDescriptor()),
        ], semaphores=[], cbs=cbs)
        self._run([src, dst], prog)
