// SPDX-License-Identifier: Apache-2.0
// Reader of the end of a matmul (bias_act_rows.cpp; RISCV_1): one unit of cw output tiles of tile row r,
// columns c0 .. c0 + cw of the fp32 partials x [pieces * piece_rows tile rows, W tiles] (the matmul's K
// pieces one below the other). First the unit's bias tiles (CB 2, the bias replicated over 32 rows, fp32),
// then per output tile its `pieces` partial tiles, piece by piece (CB 0), so L1 holds a unit's bias and a
// few partials, never a whole row (the FF-up's 192-tile rows would not fit).
// A core may do several units, of one matmul or of several (a program's jobs), one after the other.
// With GR00T_FINISH_RESIDUAL defined, each output tile's partials are followed by the same tile of the fp32
// residual stream [rows, W tiles] (CB 3), which the compute kernel adds.
// When the matmul runs in the same program (graph.rs, "matmul_end"), this reader first waits until every
// matmul core has said its partials are in DRAM (semaphore 0 counts their increments).
// Runtime args: the matmul cores to wait for (0: none, the partials are there); units; per unit UNIT_WORDS
// words: x, bias (, residual) addresses; W; r; c0; cw; pieces; piece_rows. Compile-time args: a partials tensor's, a bias tensor's (and a stream's) accessor args (every
// unit's are alike: interleaved fp32 TILE tensors).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/noc.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

#ifdef GR00T_FINISH_RESIDUAL
constexpr uint32_t EXTRA = 1;  // the stream's address after the bias's
#else
constexpr uint32_t EXTRA = 0;
#endif
constexpr uint32_t UNIT_WORDS = 8 + EXTRA;

void kernel_main() {
    const uint32_t producers = get_arg_val<uint32_t>(0);
    const uint32_t units = get_arg_val<uint32_t>(1);
    if (producers > 0) {
        noc_semaphore_wait_min(reinterpret_cast<volatile tt_l1_ptr uint32_t*>(get_semaphore(0)), producers);
    }
    constexpr uint32_t cb_x = 0, cb_bias = 2;
    constexpr auto x_args = TensorAccessorArgs<0>();
    constexpr auto b_args = TensorAccessorArgs<x_args.next_compile_time_args_offset()>();
    const uint32_t page = get_local_cb_interface(cb_x).fifo_page_size;
    Noc noc;
    DataflowBuffer dfb_x(cb_x), dfb_b(cb_bias);
#ifdef GR00T_FINISH_RESIDUAL
    constexpr uint32_t cb_res = 3;
    constexpr auto r_args = TensorAccessorArgs<b_args.next_compile_time_args_offset()>();
    DataflowBuffer dfb_r(cb_res);
#endif
    for (uint32_t u = 0; u < units; ++u) {
        const uint32_t a = 2 + u * UNIT_WORDS;
        const auto x = TensorAccessor(x_args, get_arg_val<uint32_t>(a));
        const auto bias = TensorAccessor(b_args, get_arg_val<uint32_t>(a + 1));
#ifdef GR00T_FINISH_RESIDUAL
        const auto res = TensorAccessor(r_args, get_arg_val<uint32_t>(a + 2));
#endif
        const uint32_t w = get_arg_val<uint32_t>(a + EXTRA + 2);
        const uint32_t r = get_arg_val<uint32_t>(a + EXTRA + 3);
        const uint32_t c0 = get_arg_val<uint32_t>(a + EXTRA + 4);
        const uint32_t cw = get_arg_val<uint32_t>(a + EXTRA + 5);
        const uint32_t pieces = get_arg_val<uint32_t>(a + EXTRA + 6);
        const uint32_t piece_rows = get_arg_val<uint32_t>(a + EXTRA + 7);
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
#ifdef GR00T_FINISH_RESIDUAL
            dfb_r.reserve_back(1);
            noc.async_read(res, dfb_r, page, {.page_id = r * w + c0 + t}, {.offset_bytes = 0});
            noc.async_read_barrier();
            dfb_r.push_back(1);
#endif
        }
    }
}
