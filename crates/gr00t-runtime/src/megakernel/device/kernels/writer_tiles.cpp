// SPDX-License-Identifier: Apache-2.0
// DRAM writer of a run of whole tiles (RISCV_0): CB 16's tiles, in order, to pages first .. first + count
// of an interleaved TILE tensor. When the next phase of the same program reads them (a LayerNorm before its
// matmul, graph.rs), it then increments semaphore 0 of each of that phase's cores once every write is
// acknowledged. Runtime args: buffer address, first page, page count, the cores to signal (0: none) and
// each one's NOC x and y. Compile-time args: the tensor's accessor args.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

void kernel_main() {
    const uint32_t addr = get_arg_val<uint32_t>(0);
    const uint32_t first = get_arg_val<uint32_t>(1);
    const uint32_t count = get_arg_val<uint32_t>(2);
    constexpr uint32_t cb_out = 16;
    constexpr auto args = TensorAccessorArgs<0>();
    const auto dst = TensorAccessor(args, addr);
    const uint32_t page = get_local_cb_interface(cb_out).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb(cb_out);
    for (uint32_t i = 0; i < count; ++i) {
        dfb.wait_front(1);
        noc.async_write(dfb, dst, page, {}, {.page_id = first + i});
        noc.async_writes_flushed();
        dfb.pop_front(1);
    }
    noc.async_write_barrier();
    for (uint32_t e = 0, n = get_arg_val<uint32_t>(3); e < n; ++e) {
        noc_semaphore_inc(get_noc_addr(get_arg_val<uint32_t>(4 + 2 * e), get_arg_val<uint32_t>(5 + 2 * e),
                                       get_semaphore(0)), 1);
    }
    noc_async_atomic_barrier();
}
