"""The kernels and CBs of each kind of our device programs (gr00t-megakernel `device` feature): a matmul's share
on the plan's compute cores, a LayerNorm (or softmax), attention per head, a matmul's end. Each builder takes
a list of *tasks*: the phases of one kind (one group of the Rust plan, tt_blackhole::plan::program) that a
chain runs on the same cores, or the one phase of a program of its own. A core runs one set of kernels for
the whole program and does its share of each task in turn; before a task its reader waits until the core's
semaphore 0 holds the task's count (waits[xy]: the increments of every phase before one of its tasks so far),
after it its writer increments semaphore 0 of every core of the next phase (signal).

The data-movement kernels read their work from task tables (kernels/task_table.h): a uint32 DRAM tensor, a
row per core, since one program for a whole denoising step gives a core more words than tt-metal's 341
runtime args; the compute kernels keep theirs in runtime args, packed two 16-bit values a word. A mixin of
ttnn_worker.py's `Worker`, shipped in the same source string (worker.rs): the names used here (np, ttnn,
pair, padded_args, ...) are that file's globals, looked up when a request calls them.
"""


class PartsOps:
    def _table_kernel(self, source, per_core, ctas, config, cb):
        """A data-movement kernel reading its work from a task table: per_core {(x, y): [words]} written as a
        uint32 ROW_MAJOR DRAM tensor (a row per core, its width a power of two of at least 16 words so that
        few widths compile), the table's accessor args first in the compile-time args, runtime args (the
        table's address, the core's row), and the CB (index cb) its row is read into. A table with the same
        words as one already on the device is that one (a denoising step's tables are the same step after
        step while the tensors' addresses are); the bytes written are counted in self.table_bytes. Answers
        the kernel, the CB and the table."""
        n = max(len(v) for v in per_core.values())
        if n > TABLE_WORDS:
            raise RuntimeError(f"task table: {n} words on one core, the plan allows at most {TABLE_WORDS}")
        width = 16
        while width < n:
            width *= 2
        order = sorted(per_core)
        rows = np.zeros((len(order), width), np.uint32)
        for i, xy in enumerate(order):
            rows[i, :len(per_core[xy])] = per_core[xy]
        key = (rows.shape, rows.tobytes())
        table = self.tables.pop(key, None)
        if table is None:
            table = ttnn.Tensor(rows, ttnn.uint32, self.dev, ttnn.ROW_MAJOR_LAYOUT, ttnn.DRAM_MEMORY_CONFIG)
            self.table_bytes += rows.nbytes
        self.tables[key] = table  # the newest last: the oldest go first when there are too many
        while len(self.tables) > TABLES_KEPT:
            self.retired.append(self.tables.pop(next(iter(self.tables))))
        ranges = ttnn.CoreRangeSet([ttnn.CoreRange(ttnn.CoreCoord(*xy), ttnn.CoreCoord(*xy)) for xy in order])
        ra = ttnn.RuntimeArgs()
        for i, (x_, y_) in enumerate(order):
            ra[x_][y_] = [table.buffer_address(), i]
        kernel = ttnn.KernelDescriptor(
            kernel_source=source, source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE, core_ranges=ranges,
            compile_time_args=list(ttnn.TensorAccessorArgs(table).get_compile_time_args()) + list(ctas),
            runtime_args=ra, config=config)
        cbd = ttnn.CBDescriptor(total_size=width * 4, core_ranges=ranges, format_descriptors=[
            ttnn.CBFormatDescriptor(buffer_index=cb, data_format=ttnn.uint32, page_size=width * 4)])
        return kernel, cbd, table

    def _program_parts(self, k, per_core, ctas, compute_cfg, cb_pages, tensors):
        """The three kernels of a program kind on its cores: k["reader"] and k["writer"] over their task
        tables (per_core["rd"], per_core["wr"]: CBs 30 and 31), k["compute"] with runtime args per_core["cp"]
        (padded to one length, added to its compile-time args), ctas {"rd", "wr"} the accessor args after the
        tables'; CBs {index: (format, page bytes, pages)}. Answers kernels, CBs and tensors."""
        rd_k, rd_cb, rd_t = self._table_kernel(k["reader"], per_core["rd"], ctas["rd"],
                                               ttnn.ReaderConfigDescriptor(), TABLE_CB["reader"])
        wr_k, wr_cb, wr_t = self._table_kernel(k["writer"], per_core["wr"], ctas["wr"],
                                               ttnn.WriterConfigDescriptor(), TABLE_CB["writer"])
        cp, cp_n = padded_args(per_core["cp"])
        ranges = rd_k.core_ranges
        compute = ttnn.KernelDescriptor(kernel_source=k["compute"],
                                        source_type=ttnn.KernelDescriptor.SourceType.SOURCE_CODE,
                                        core_ranges=ranges, compile_time_args=[cp_n], runtime_args=cp,
                                        config=compute_cfg)
        cbs = [ttnn.CBDescriptor(total_size=n * page, core_ranges=ranges, format_descriptors=[
            ttnn.CBFormatDescriptor(buffer_index=i, data_format=fmt, page_size=page)])
            for i, (fmt, page, n) in sorted(cb_pages.items())] + [rd_cb, wr_cb]
        tensors = {**{id(t): t for t in tensors if t is not None}, id(rd_t): rd_t, id(wr_t): wr_t}
        return [rd_k, wr_k, compute], cbs, tensors

    def _matmul_parts(self, h, jobs, phases):
        """The kernels and CBs of one program for several matmuls ("jobs": (header, act, out, mt, phase) each):
        a core that holds units of several does them in turn, so they cost one launch. The kernels, dtypes
        and fidelity are h's (every job's are the same); the CBs the largest any job's plan gives. phases
        [(producers, signal)], jobs in phase order: a core waits for the sum of the producers of every phase
        it took part in so far, and after its last job of a phase increments semaphore 0 of each core of
        signal (NOC coordinates: that phase's end). Also answers the tensors {id: tensor} and the matmul
        cores [(x, y)]."""
        arena = self.buffers[h["arena"]]
        # A job may name its own arena (the action head's beside the DiT's): every arena has the same tile
        # format and page, so the program's accessor args are any one's; the job's address is in its words.
        arena_of = lambda jh: self.buffers[jh.get("arena", h["arena"])]
        per_core = {}  # (x, y) -> [(job header, unit, act, out, mt, phase)]
        for jh, act, out, mt, ph in jobs:
            for u in jh["units"]:
                per_core.setdefault((u["x"], u["y"]), []).append((jh, u, act, out, mt, ph))
        waits, signals = {}, {}  # per core: each job's semaphore count, the cores it signals after it
        for xy, work in per_core.items():
            count, w_, s_ = 0, [], []
            for i, (*_, ph) in enumerate(work):
                if i == 0 or work[i - 1][5] != ph:
                    count += phases[ph][0]
                w_.append(count if phases[ph][0] else 0)
                last = i + 1 == len(work) or work[i + 1][5] != ph
                s_.append(phases[ph][1] if last else [])
            waits[xy], signals[xy] = w_, s_
        cb = {k: max(jh["cbs"][k] for jh, *_ in jobs) for k in ("act", "weights", "out")}  # pages per CB
        job_word = lambda u, mt: u["n_count"] | u["k_count"] << 10 | mt << 21
        for jh, _, _, mt, _ in jobs:
            for u in jh["units"]:
                if u["n_count"] >= 1 << 10 or u["k_count"] >= 1 << 11 or mt >= 1 << 11:
                    raise RuntimeError(f"matmul job ({u['n_count']}, {u['k_count']}, {mt}) does not fit one word")
        words = {
            "rd": {xy: [arena.buffer_address(), len(work), cb["act"], cb["weights"]] + [
                v for (jh, u, act, out, mt, _), wait in zip(work, waits[xy])
                for v in (act.buffer_address(), u["first_tile"], pair(u["n_count"], u["k_count"]),
                          pair(u["k_start"], jh["kt"]), pair(mt, wait), arena_of(jh).buffer_address())]
                for xy, work in per_core.items()},
            "cp": {xy: [len(work), cb["act"], cb["weights"]] + [job_word(u, mt) for _, u, _, _, mt, _ in work]
                   for xy, work in per_core.items()},
            "wr": {xy: [len(work)] + [v for (jh, u, _, out, mt, _), sig in zip(work, signals[xy])
                                      for v in [out.buffer_address(), pair(u["piece"], len(sig)),
                                                pair(u["n_start"], u["n_count"]), pair(mt, jh["nt"])]
                                      + [pair(*xy_) for xy_ in sig]]
                   for xy, work in per_core.items()},
        }
        _, act0, out0, _, _ = jobs[0]
        acc = lambda t: list(ttnn.TensorAccessorArgs(t).get_compile_time_args())
        cfg = ttnn.ComputeConfigDescriptor(math_fidelity=getattr(ttnn.MathFidelity, h["math_fidelity"]),
                                           fp32_dest_acc_en=True)
        mm = CB["matmul_share"]
        cbs = {mm["cb_act"]: (ttnn.bfloat16, 2048, cb["act"]),
               mm["cb_w"]: (DTYPES[h["weight_dtype"]], h["weight_page"], cb["weights"]),
               mm["cb_out"]: (ttnn.float32, 4096, cb["out"])}
        arenas = {id(a_): a_ for a_ in [arena] + [arena_of(jh) for jh, *_ in jobs]}
        tensors = list(arenas.values()) + [t for _, a_, o_, _, _ in jobs for t in (a_, o_)]
        kernels, cbs, tensors = self._program_parts(h["kernels"], words, {"rd": acc(act0) + acc(arena),
                                                                          "wr": acc(out0)}, cfg, cbs, tensors)
        return kernels, cbs, tensors, list(per_core)

    def _rows_parts(self, h, tasks, work_cbs, unpack_to_dest=(), out_f32=False):
        """The kernels and CBs of a row kernel's program (LayerNorm, softmax) over tasks, each a dict: x "tx"
        (fp32, "row_tiles" tile rows of "wt" tiles), the scaler tile "ts", the vectors "tg" / "tb"
        ("vec_tiles" tiles each, "vec_len" real columns, b from column "b_col" of its tensor's row 0: the
        reader splits the AdaLN [scale | shift] row), the output "out" (bf16, or fp32 with out_f32); its
        rows shared over up to h["cores"] of "cores" (default: the grid's first row); "waits" {xy: count}
        and "signal" [NOC xy] as the module says. The kernels are h's, the fp32 work CBs work_cbs {index:
        pages}. Also answers the tensors and, per task, the cores it used."""
        per_core, used_by_task = {}, []
        for t in tasks:
            cores = t.get("cores") or [(c, 0) for c in range(self.dev.compute_with_storage_grid_size().x)]
            n_cores = max(1, min(h["cores"], t["row_tiles"], len(cores)))
            per, extra = divmod(t["row_tiles"], n_cores)
            first = 0
            for c in range(n_cores):
                count = per + (1 if c < extra else 0)
                w = per_core.setdefault(cores[c], {"rd": [], "cp": [], "wr": []})
                w["rd"].append([t["tx"].buffer_address(), t["ts"].buffer_address(), t["tg"].buffer_address(),
                                t["tb"].buffer_address(), t["wt"], first, count, t["vec_tiles"], t.get("b_col", 0),
                                t.get("vec_len", 0), t.get("waits", {}).get(cores[c], 0)])
                w["cp"].append([pair(t["wt"], count)])
                w["wr"].append([t["out"].buffer_address(), first * t["wt"], count * t["wt"], len(t.get("signal", ()))]
                               + [pair(*xy) for xy in t.get("signal", ())])
                first += count
            used_by_task.append(cores[:n_cores])
        words = {r: {xy: [len(w[r])] + [v for task in w[r] for v in task] for xy, w in per_core.items()}
                 for r in ("rd", "cp", "wr")}
        wt = max(t["wt"] for t in tasks)
        f32, bf16 = (ttnn.float32, 4096), (ttnn.bfloat16, 2048)
        rr = CB["reader_rows"]
        cbs = {rr["cb_x"]: (*f32, wt), rr["cb_scaler"]: (*f32, 1),
               CB["writer_tiles"]["cb_out"]: (*(f32 if out_f32 else bf16), 2)}
        cbs.update({i: (*f32, n) for i, n in work_cbs.items()})
        acc = lambda t: list(ttnn.TensorAccessorArgs(t).get_compile_time_args())
        t0 = tasks[0]
        cfg = ttnn.ComputeConfigDescriptor(math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True)
        if unpack_to_dest:  # one entry per CB index
            cfg.unpack_to_dest_mode = [ttnn.UnpackToDestMode.UnpackToDestFp32 if i in unpack_to_dest
                                       else ttnn.UnpackToDestMode.Default for i in range(64)]
        tensors = [t[k] for t in tasks for k in ("tx", "ts", "tg", "tb", "out")]
        kernels, cbs, tensors = self._program_parts(
            h["kernels"], words, {"rd": acc(t0["tx"]) + acc(t0["ts"]) + acc(t0["tg"]) + acc(t0["tb"]),
                                  "wr": acc(t0["out"])}, cfg, cbs, tensors)
        return kernels, cbs, tensors, used_by_task

    @staticmethod
    def _head_starts(heads, hd):
        """The heads a run of heads may start at: those whose columns start on a tile boundary (a core owns
        whole output tiles). One per core at most, so also the most cores attention can use."""
        return [g for g in range(heads) if g * hd % 32 == 0]

    def _attention_parts(self, h, tasks):
        """The kernels and CBs of the attention program over tasks, each a dict: q "tq" [mp, dw], k "tk" and v
        "tv" [np, dw] (bf16, dw = heads * hd padded to whole tiles: the projections' own layout), the scaler
        tile "ts", the key mask "tm" (fp32, [32, np], row 0), the output "out" [mp, dw] (bf16); "heads",
        "mp", "np", "hd"; "cores", "waits", "signal" as _rows_parts'. Every task of a program has the same
        shapes (the plan's groups: self, text and image attentions apart). The reader splits the heads, the
        writer merges them; a core owns whole output tiles, so the heads go out in runs whose columns start
        on a tile boundary, up to h["cores"] of them. GQA: k and v are [np, kv_heads * hd padded], query head
        g reads K/V head g // (heads // kv_heads) ("kv_heads": the task's, else the step h's, else heads);
        "causal" (the task's, else h's, else false): query row i attends keys j <= i (the reader builds the
        diagonal mask tiles, CB cb_diag). Also answers the tensors and, per task, the cores it used."""
        per_core, used_by_task, cw_max = {}, [], 1
        shapes = {(t["heads"], t["mp"], t["np"], t["hd"], t.get("kv_heads") or h.get("kv_heads") or t["heads"],
                   bool(t.get("causal", h.get("causal", False)))) for t in tasks}
        if len(shapes) != 1:
            raise RuntimeError(f"attention: one program's tasks have shapes {sorted(shapes)}")
        heads, mp, np_, hd, kv_heads, causal = shapes.pop()
        if kv_heads < 1 or heads % kv_heads:
            raise RuntimeError(f"attention: {heads} query heads over {kv_heads} K/V heads")
        mt, nt, dt, w = mp // 32, np_ // 32, -(-hd // 32), -(-heads * hd // 32)
        w_kv, group = -(-kv_heads * hd // 32), heads // kv_heads
        starts = self._head_starts(heads, hd)
        for t in tasks:
            cores = t.get("cores") or [(c, 0) for c in range(self.dev.compute_with_storage_grid_size().x)]
            n_cores = max(1, min(h["cores"], len(starts), len(cores)))
            per, extra = divmod(len(starts), n_cores)
            first = 0
            sig = [pair(*xy) for xy in t.get("signal", ())]
            for c in range(n_cores):
                count = per + (1 if c < extra else 0)
                h0 = starts[first]
                h1 = starts[first + count] if first + count < len(starts) else heads
                c0, c1 = h0 * hd // 32, -(-h1 * hd // 32)
                cw_max = max(cw_max, c1 - c0)
                wk = per_core.setdefault(cores[c], {"rd": [], "cp": [], "wr": []})
                wk["rd"].append([t["tq"].buffer_address(), t["tk"].buffer_address(), t["tv"].buffer_address(),
                                 t["ts"].buffer_address(), t["tm"].buffer_address(), h0, h1 - h0, mt, nt, dt, hd, w,
                                 w_kv, t.get("waits", {}).get(cores[c], 0), group, int(causal)])
                wk["cp"].append([pair(h1 - h0, mt), pair(nt, dt), int(causal)])
                wk["wr"].append([t["out"].buffer_address(), h0, h1 - h0, mt, dt, hd, w, c0, c1 - c0, len(sig)] + sig)
                first += count
            used_by_task.append(cores[:n_cores])
        words = {r: {xy: [len(wk[r])] + [v for task in wk[r] for v in task] for xy, wk in per_core.items()}
                 for r in ("rd", "cp", "wr")}
        f32, bf16 = (ttnn.float32, 4096), (ttnn.bfloat16, 2048)
        a, r = CB["attention_head"], CB["reader_attention"]
        cbs = {a["cb_q"]: (*bf16, mt * dt), a["cb_scaler"]: (*f32, 1), a["cb_k"]: (*bf16, nt * dt),
               a["cb_v"]: (*bf16, nt * dt), r["cb_zero"]: (*bf16, 1), a["cb_mask"]: (*f32, nt),
               r["cb_scratch"]: (*bf16, dt + 1), a["cb_s"]: (*f32, nt), a["cb_s2"]: (*f32, nt), a["cb_e"]: (*f32, nt),
               a["cb_max"]: (*f32, 1), a["cb_rsum"]: (*f32, 1), a["cb_p"]: (*bf16, nt), a["cb_o"]: (*bf16, 2),
               CB["writer_merge_heads"]["cb_asm"]: (*bf16, mt * cw_max)}
        if causal:
            cbs[a["cb_diag"]] = (*f32, min(mt, nt))
        acc = lambda t: list(ttnn.TensorAccessorArgs(t).get_compile_time_args())
        t0 = tasks[0]
        cfg = ttnn.ComputeConfigDescriptor(math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True)
        tensors = [t[k] for t in tasks for k in ("tq", "tk", "tv", "ts", "tm", "out")]
        kernels, cbs, tensors = self._program_parts(
            h["kernels"], words, {"rd": sum((acc(t0[k]) for k in ("tq", "tk", "tv", "ts", "tm")), []),
                                  "wr": acc(t0["out"])}, cfg, cbs, tensors)
        return kernels, cbs, tensors, used_by_task

    @staticmethod
    def _finish_units(st, jobs, n_grid):
        """The units of a matmul end: (job, tile row, first column, columns), at most st["unit_tiles"] columns,
        a row cut into no more pieces than n_grid cores share (jobs: tuples whose first item has mt, nt)."""
        units = []
        for job in jobs:
            jh = job[0]
            mt, nt = jh["mt"], jh["nt"]
            per_row = -(-nt // max(1, min(st.get("unit_tiles", nt), nt)))
            per_row = min(per_row, max(1, n_grid // mt))
            cw = -(-nt // per_row)
            units += [(job, r, c0, min(cw, nt - c0)) for r in range(mt) for c0 in range(0, nt, cw)]
        return units

    def _finish_parts(self, st, tasks):
        """The kernels and CBs of one program ending matmuls, over tasks, each a dict: "jobs" [(header with
        mt, nt, k_split; partials; bias; out; the fp32 stream to add, or None)], "cores" (default: the grid's,
        row-major), "cut" (the cores its units are cut for, default all of "cores"), "waits", "signal" as
        _rows_parts'. A task's units (up to st["unit_tiles"] output tiles of one tile row) are dealt over its
        first cores in turn, a core per unit up to "cut", a core doing its units one after the other, so its
        L1 holds only one unit's bias. The kernels and out_f32 are st's; so is whether a stream is added
        (every job has one, or none has). Also answers the tensors and, per task, the cores it used."""
        per_core, used_by_task, all_jobs, cw_max = {}, [], [], 1
        res = {job[4] is not None for t in tasks for job in t["jobs"]}
        if len(res) != 1:
            raise RuntimeError("finish: a program adds the stream in every job or in none")
        res = res.pop()
        grid = self.dev.compute_with_storage_grid_size()
        for t in tasks:
            pool = t.get("cores") or [(x_, y_) for y_ in range(grid.y) for x_ in range(grid.x)]
            n_grid = max(1, t.get("cut") or len(pool))
            units = self._finish_units(st, t["jobs"], n_grid)
            cores = pool[:min(len(units), n_grid)]
            if len(cores) < min(len(units), n_grid):
                raise RuntimeError(f"finish: {len(units)} units, {len(pool)} cores given")
            mine = {}
            for i, u in enumerate(units):
                mine.setdefault(cores[i % len(cores)], []).append(u)
            sig = [pair(*xy) for xy in t.get("signal", ())]
            for xy, work in mine.items():
                wk = per_core.setdefault(xy, {"rd": [], "cp": [], "wr": []})
                wk["rd"].append([t.get("waits", {}).get(xy, 0), len(work)] + [
                    v for (jh, tx, tb, _, tr), r, c0, cw in work
                    for v in ([tx.buffer_address(), tb.buffer_address()] + ([tr.buffer_address()] if res else [])
                              + [jh["nt"], r, c0, cw, jh["k_split"], jh["mt"]])])
                wk["cp"] += [pair(cw, jh["k_split"]) for (jh, *_), _, _, cw in work]
                wk["wr"].append([len(work)] + [v for (jh, _, _, out, _), r, c0, cw in work
                                               for v in (out.buffer_address(), (r + jh.get("out_row0", 0)) * jh["nt"] + c0, cw)]
                                + [len(sig)] + sig)
            used_by_task.append(cores)
            all_jobs += t["jobs"]
            cw_max = max([cw_max] + [cw for *_, cw in units])
        pieces_max = max(job[0]["k_split"] for job in all_jobs)
        head = pair(pieces_max, cw_max)
        words = {
            "rd": {xy: [len(wk["rd"]), head] + [v for task in wk["rd"] for v in task] for xy, wk in per_core.items()},
            "cp": {xy: [len(wk["cp"]), head] + wk["cp"] for xy, wk in per_core.items()},
            "wr": {xy: [len(wk["wr"])] + [v for task in wk["wr"] for v in task] for xy, wk in per_core.items()},
        }
        f32 = (ttnn.float32, 4096)
        fin = CB["bias_act_rows"]
        cbs = {fin["cb_x"]: (*f32, 2 * pieces_max), fin["cb_bias"]: (*f32, cw_max),
               fin["cb_y"]: (*(f32 if st["out_f32"] else (ttnn.bfloat16, 2048)), 2)}
        if res:
            cbs[fin["cb_res"]] = (*f32, 2)
        acc = lambda t: list(ttnn.TensorAccessorArgs(t).get_compile_time_args())
        cfg = ttnn.ComputeConfigDescriptor(math_fidelity=ttnn.MathFidelity.HiFi4, fp32_dest_acc_en=True)
        fp32_in = (fin["cb_x"], fin["cb_bias"], fin["cb_res"])
        cfg.unpack_to_dest_mode = [ttnn.UnpackToDestMode.UnpackToDestFp32 if i in fp32_in
                                   else ttnn.UnpackToDestMode.Default for i in range(64)]
        _, tx0, tb0, out0, tr0 = all_jobs[0]
        tensors = [x for job in all_jobs for x in job[1:]]
        kernels, cbs, tensors = self._program_parts(
            st["kernels"], words, {"rd": acc(tx0) + acc(tb0) + (acc(tr0) if res else []), "wr": acc(out0)},
            cfg, cbs, tensors)
        return kernels, cbs, tensors, used_by_task
