// SPDX-License-Identifier: Apache-2.0
// DRAM reader of a run of whole tiles (RISCV_1): pages first .. first + count of an interleaved TILE
// tensor into CB 0, one page per push, so compute starts on the first tile while the next streams in.
// Runtime args: buffer address, first page, page count. Compile-time args: the tensor's accessor args.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"
//@@GR00T_CB_IDS reader_tiles.cpp@@

void kernel_main() {
    const uint32_t addr = get_arg_val<uint32_t>(0);
    const uint32_t first = get_arg_val<uint32_t>(1);
    const uint32_t count = get_arg_val<uint32_t>(2);
    constexpr auto args = TensorAccessorArgs<0>();
    const auto src = TensorAccessor(args, addr);
    const uint32_t page = get_local_cb_interface(cb_in).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb(cb_in);
    for (uint32_t i = 0; i < count; ++i) {
        dfb.reserve_back(1);
        noc.async_read(src, dfb, page, {.page_id = first + i}, {.offset_bytes = 0});
        noc.async_read_barrier();
        dfb.push_back(1);
    }
}
