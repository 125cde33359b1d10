// SPDX-License-Identifier: Apache-2.0
// Writer of one compute core's output tiles (RISCV_0): the fp32 partial C[m, n] of K piece `piece`
// goes to page (piece * m_tiles + m) * n_tiles + n of the interleaved fp32 TILE output
// [k_split * m_tiles * 32, n_tiles * 32], in the order the compute kernel packs them (n outer, m inner).
// When the matmuls' ends run in the same program on other cores (graph.rs, "matmul_end"), this core then
// tells each of them that its partials are in DRAM: once every write is acknowledged, an atomic increment
// of semaphore 0 on each end core (whose reader waits for one from every matmul core). In a chain of
// matmuls (one program for several phases) that happens after the core's last job of each phase.
// Its task table (task_table.h, CB 31): jobs; per job (16-bit halves, low first, where a word holds two):
// output address; piece and the cores to signal once this job's partials are written (0: none); n_start
// and n_count; m_tiles and n_tiles; then each core to signal, its NOC x and y.
// Compile-time args after the table's: an output's accessor args (every job's output is an interleaved fp32
// TILE tensor).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TASK_TABLE@@
//@@GR00T_CB_IDS writer_partials.cpp@@

void kernel_main() {
    const TaskTable<31> t;
    const uint32_t jobs = t[0];
    constexpr auto out_args = TensorAccessorArgs<TABLE_CTA_END>();
    const uint32_t page_bytes = get_local_cb_interface(cb_out).fifo_page_size;

    Noc noc;
    DataflowBuffer dfb_out(cb_out);
    for (uint32_t j = 0, a = 1; j < jobs; ++j) {
        const auto out = TensorAccessor(out_args, t[a]);
        const uint32_t ps = t[a + 1], nn = t[a + 2];
        const uint32_t mn = t[a + 3];
        const uint32_t piece = ps & 0xffff, signal = ps >> 16;
        const uint32_t n_start = nn & 0xffff, n_count = nn >> 16;
        const uint32_t m_tiles = mn & 0xffff, n_tiles = mn >> 16;
        for (uint32_t n = n_start; n < n_start + n_count; ++n) {
            for (uint32_t m = 0; m < m_tiles; ++m) {
                dfb_out.wait_front(1);
                noc.async_write(dfb_out, out, page_bytes, {}, {.page_id = (piece * m_tiles + m) * n_tiles + n});
                noc.async_writes_flushed();
                dfb_out.pop_front(1);
            }
        }
        signal_cores(t, a + 4, signal);
        a += 4 + signal;
    }
    noc.async_write_barrier();
}
