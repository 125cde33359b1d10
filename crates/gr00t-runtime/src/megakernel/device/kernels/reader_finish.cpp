// SPDX-License-Identifier: Apache-2.0
// Reader of the end of a matmul (bias_act_rows.cpp; RISCV_1): one unit of cw output tiles of tile row r,
// columns c0 .. c0 + cw of the fp32 partials x [pieces * piece_rows tile rows, W tiles] (the matmul's K
// pieces one below the other). First the unit's bias tiles (CB 2, the bias replicated over 32 rows, fp32),
// then per output tile its `pieces` partial tiles, piece by piece (CB 0), so L1 holds a unit's bias and a
// few partials, never a whole row (the FF-up's 192-tile rows would not fit).
// A core may do several units, of one matmul or of several (a program's jobs), one after the other.
// Runtime args: units; per unit 8 words: x, bias addresses; W; r; c0; cw; pieces; piece_rows.
// Compile-time args: a partials tensor's and a bias tensor's accessor args (every unit's are alike:
// interleaved fp32 TILE tensors).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

void kernel_main() {
    const uint32_t units = get_arg_val<uint32_t>(0);
    constexpr uint32_t cb_x = 0, cb_bias = 2;
    constexpr auto x_args = TensorAccessorArgs<0>();
    constexpr auto b_args = TensorAccessorArgs<x_args.next_compile_time_args_offset()>();
    const uint32_t page = get_local_cb_interface(cb_x).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb_x(cb_x), dfb_b(cb_bias);
    for (uint32_t u = 0; u < units; ++u) {
        const uint32_t a = 1 + u * 8;
        const auto x = TensorAccessor(x_args, get_arg_val<uint32_t>(a));
        const auto bias = TensorAccessor(b_args, get_arg_val<uint32_t>(a + 1));
        const uint32_t w = get_arg_val<uint32_t>(a + 2);
        const uint32_t r = get_arg_val<uint32_t>(a + 3);
        const uint32_t c0 = get_arg_val<uint32_t>(a + 4);
        const uint32_t cw = get_arg_val<uint32_t>(a + 5);
        const uint32_t pieces = get_arg_val<uint32_t>(a + 6);
        const uint32_t piece_rows = get_arg_val<uint32_t>(a + 7);
        dfb_b.reserve_back(cw);
        for (uint32_t t = 0; t < cw; ++t) {
            noc.async_read(bias, dfb_b, page, {.page_id = c0 + t}, {.offset_bytes = t * page});
        }
        noc.async_read_barrier();
        dfb_b.push_back(cw);
        for (uint32_t t = 0; t < cw; ++t) {
            dfb_x.reserve_back(pieces);
            for (uint32_t p = 0; p < pieces; ++p) {
                noc.async_read(x, dfb_x, page, {.page_id = (p * piece_rows + r) * w + c0 + t},
                               {.offset_bytes = p * page});
            }
            noc.async_read_barrier();
            dfb_x.push_back(pieces);
        }
    }
}
