// SPDX-License-Identifier: Apache-2.0
// Writer of one compute core's output tiles (RISCV_0): the fp32 partial C[m, n] of K piece `piece`
// goes to page (piece * m_tiles + m) * n_tiles + n of the interleaved fp32 TILE output
// [k_split * m_tiles * 32, n_tiles * 32], in the order the compute kernel packs them (n outer, m inner).
// When the matmuls' ends run in the same program on other cores (graph.rs, "matmul_end"), this core then
// tells each of them that its partials are in DRAM: once every write is acknowledged, an atomic increment
// of semaphore 0 on each end core (whose reader waits for one from every matmul core).
// Runtime args: jobs; per job 6 words: output address, piece, n_start, n_count, m_tiles, n_tiles; then
// the end cores to signal (0: none) and each one's NOC x and y.
// Compile-time args: an output's accessor args (every job's output is an interleaved fp32 TILE tensor).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

void kernel_main() {
    const uint32_t jobs = get_arg_val<uint32_t>(0);
    constexpr uint32_t cb_out = 2;
    constexpr auto out_args = TensorAccessorArgs<0>();
    const uint32_t page_bytes = get_local_cb_interface(cb_out).fifo_page_size;

    Noc noc;
    DataflowBuffer dfb_out(cb_out);
    for (uint32_t j = 0; j < jobs; ++j) {
        const uint32_t a = 1 + j * 6;
        const auto out = TensorAccessor(out_args, get_arg_val<uint32_t>(a));
        const uint32_t piece = get_arg_val<uint32_t>(a + 1);
        const uint32_t n_start = get_arg_val<uint32_t>(a + 2);
        const uint32_t n_count = get_arg_val<uint32_t>(a + 3);
        const uint32_t m_tiles = get_arg_val<uint32_t>(a + 4);
        const uint32_t n_tiles = get_arg_val<uint32_t>(a + 5);
        for (uint32_t n = n_start; n < n_start + n_count; ++n) {
            for (uint32_t m = 0; m < m_tiles; ++m) {
                dfb_out.wait_front(1);
                noc.async_write(dfb_out, out, page_bytes, {}, {.page_id = (piece * m_tiles + m) * n_tiles + n});
                noc.async_writes_flushed();
                dfb_out.pop_front(1);
            }
        }
    }
    noc.async_write_barrier();
    const uint32_t s = 1 + jobs * 6;
    for (uint32_t e = 0, n = get_arg_val<uint32_t>(s); e < n; ++e) {
        noc_semaphore_inc(get_noc_addr(get_arg_val<uint32_t>(s + 1 + 2 * e), get_arg_val<uint32_t>(s + 2 + 2 * e),
                                       get_semaphore(0)), 1);
    }
    noc_async_atomic_barrier();
}
