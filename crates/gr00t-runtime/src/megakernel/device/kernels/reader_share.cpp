// SPDX-License-Identifier: Apache-2.0
// DRAM reader of one compute core's matmul share (RISCV_1 of the compute core).
//
// 1. The activation block A[m, k_start .. k_start + k_count] for every tile row m (bf16 tiles of an
//    interleaved TILE tensor, row stride `act_kt` tiles) into CB 0, once.
// 2. The core's weight tiles, straight from the arena buffer in DRAM (one page = one arena tile,
//    interleaved over the banks as uploaded), in arena order: column by column, K fastest, which is the
//    order `tt_blackhole::split` stored them in. One column strip (k_count tiles) per CB 1 push; the
//    CB holds two strips, so the next strip streams while the FPU works on this one.
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

void kernel_main() {
    const uint32_t act_addr = get_arg_val<uint32_t>(0);
    const uint32_t arena_addr = get_arg_val<uint32_t>(1);
    const uint32_t first_tile = get_arg_val<uint32_t>(2);  // absolute arena page of the share's first tile
    const uint32_t n_count = get_arg_val<uint32_t>(3);
    const uint32_t k_start = get_arg_val<uint32_t>(4);
    const uint32_t k_count = get_arg_val<uint32_t>(5);
    const uint32_t m_tiles = get_arg_val<uint32_t>(6);
    const uint32_t act_kt = get_arg_val<uint32_t>(7);

    constexpr uint32_t cb_act = 0, cb_w = 1;
    constexpr auto act_args = TensorAccessorArgs<0>();
    constexpr auto arena_args = TensorAccessorArgs<act_args.next_compile_time_args_offset()>();
    const auto act = TensorAccessor(act_args, act_addr);
    const auto arena = TensorAccessor(arena_args, arena_addr);
    const uint32_t act_page = get_local_cb_interface(cb_act).fifo_page_size;
    const uint32_t w_page = get_local_cb_interface(cb_w).fifo_page_size;

    Noc noc;
    DataflowBuffer dfb_act(cb_act);
    DataflowBuffer dfb_w(cb_w);

    dfb_act.reserve_back(m_tiles * k_count);
    for (uint32_t m = 0; m < m_tiles; ++m) {
        for (uint32_t k = 0; k < k_count; ++k) {
            noc.async_read(act, dfb_act, act_page, {.page_id = m * act_kt + k_start + k},
                           {.offset_bytes = (m * k_count + k) * act_page});
        }
    }
    noc.async_read_barrier();
    dfb_act.push_back(m_tiles * k_count);

    uint32_t page = first_tile;
    for (uint32_t n = 0; n < n_count; ++n) {
        dfb_w.reserve_back(k_count);
        for (uint32_t k = 0; k < k_count; ++k, ++page) {
            noc.async_read(arena, dfb_w, w_page, {.page_id = page}, {.offset_bytes = k * w_page});
        }
        noc.async_read_barrier();
        dfb_w.push_back(k_count);
    }
}
