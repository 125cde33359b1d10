// SPDX-License-Identifier: Apache-2.0
// DRAM writer of runs of whole tiles (RISCV_0), possibly into several tensors: CB 16's tiles, in order,
// run after run, each run to pages first .. first + count of its interleaved TILE tensor (a matmul end's
// units, when one program ends several matmuls). When the next phase of a chain runs in the same program
// (the next LayerNorm, attention or matmul, graph.rs), it then increments semaphore 0 of each of that
// phase's cores once every write is acknowledged. Runtime args: runs; per run buffer address, first page,
// page count; then the cores to signal (0: none) and each one's NOC x and y. Compile-time args: an
// output's accessor args (every run's tensor is alike).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

void kernel_main() {
    const uint32_t runs = get_arg_val<uint32_t>(0);
    constexpr uint32_t cb_out = 16;
    constexpr auto args = TensorAccessorArgs<0>();
    const uint32_t page = get_local_cb_interface(cb_out).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb(cb_out);
    for (uint32_t run = 0; run < runs; ++run) {
        const auto dst = TensorAccessor(args, get_arg_val<uint32_t>(1 + run * 3));
        const uint32_t first = get_arg_val<uint32_t>(2 + run * 3);
        const uint32_t count = get_arg_val<uint32_t>(3 + run * 3);
        for (uint32_t i = 0; i < count; ++i) {
            dfb.wait_front(1);
            noc.async_write(dfb, dst, page, {}, {.page_id = first + i});
            noc.async_writes_flushed();
            dfb.pop_front(1);
        }
    }
    noc.async_write_barrier();
    const uint32_t s = 1 + runs * 3;
    for (uint32_t e = 0, n = get_arg_val<uint32_t>(s); e < n; ++e) {
        noc_semaphore_inc(get_noc_addr(get_arg_val<uint32_t>(s + 1 + 2 * e), get_arg_val<uint32_t>(s + 2 + 2 * e),
                                       get_semaphore(0)), 1);
    }
    noc_async_atomic_barrier();
}
