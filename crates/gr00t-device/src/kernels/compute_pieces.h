// SPDX-License-Identifier: Apache-2.0
// The pieces our compute kernels share: a pass over tiles into a CB, DST 0 packed as one tile, a row reduce
// over a tile row, and the row softmax (the attention's and the row-softmax program's). Pasted in by the host
// at the marker line GR00T_COMPUTE_PIECES, after the SFPU library (whose exp and reciprocal the softmax runs
// on the MATH thread): the JIT gets one source string per kernel, so a shared header travels inside each.
// For every thread (UNPACK, MATH, PACK): the marker stands outside the kernel's `#ifdef TRISC_MATH`.
// Every piece computes in DST 0 (the row reduce into the DST its caller names).
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/bcast.h"
#include "api/compute/reduce.h"
#include "api/compute/reconfig_data_format.h"
#include "api/dataflow/dataflow_buffer.h"

namespace gr00t_compute {

// A CB as the compute API names it (its id) together with its buffer (the dataflow side: wait, pop,
// reserve, push), for the pieces that do both.
struct Cb {
    uint32_t id;
    DataflowBuffer& dfb;
};

// DST 0, as the MATH thread leaves it after `tile_regs_acquire()`, handed to the packer and packed as one
// new tile of `out`.
inline void pack_dst0(DataflowBuffer& out_dfb, uint32_t out) {
    tile_regs_commit();
    out_dfb.reserve_back(1);
    tile_regs_wait();
    pack_tile(0, out);
    tile_regs_release();
    out_dfb.push_back(1);
}

// One pass over `count` tiles: DST 0 = op(t), packed to `out` one tile at a time.
template <typename Op>
inline void pass(uint32_t count, DataflowBuffer& out_dfb, uint32_t out, Op op) {
    for (uint32_t t = 0; t < count; ++t) {
        tile_regs_acquire();
        op(t);
        pack_dst0(out_dfb, out);
    }
}

// The row reduce (POOL: MAX or SUM) of the `count` front tiles of `in`, accumulated into column 0 of DST
// `dst` (acquired and `reduce_init`ed by the caller, for the caller to go on with in DST).
template <PoolType POOL>
inline void reduce_row_tiles(uint32_t in, uint32_t scaler, uint32_t count, uint32_t dst) {
    for (uint32_t t = 0; t < count; ++t) {
        reduce_tile<POOL, ReduceDim::REDUCE_ROW>(in, scaler, t, 0, dst);
    }
}

// Row softmax with max subtraction over one tile row of fp32 scores: the `count` tiles of `s` (waited for
// and popped here), p = exp(s - max) / sum, packed to `p` in its format:
//   1. max = the row max (reduce_tile MAX with `scaler`, a tile of ones, fp32), packed to `row_max` (1 tile);
//   2. e = exp(s - max): a column broadcast on the FPU, exp on the SFPU, packed to `e` (count tiles);
//   3. rsum = 1 / the row sum of e (reduce_tile SUM, the reciprocal on the SFPU), packed to `rsum` (1 tile);
//   4. p = e * rsum (column broadcast).
// `e`, `row_max` and `rsum` are fp32 work CBs, drained here. The packer must be in their format (fp32) on entry;
// it is left in p's. The unpacker is set here for each step's operands (the scores may follow bf16 work).
inline void row_softmax(uint32_t count, Cb s, uint32_t scaler, Cb e, Cb row_max, Cb rsum, Cb p) {
    s.dfb.wait_front(count);
    // 1. row max
    reconfig_data_format(s.id, scaler);
    reduce_init<PoolType::MAX, ReduceDim::REDUCE_ROW>(s.id, scaler, row_max.id);
    tile_regs_acquire();
    reduce_row_tiles<PoolType::MAX>(s.id, scaler, count, 0);
    pack_dst0(row_max.dfb, row_max.id);
    reduce_uninit();
    row_max.dfb.wait_front(1);
    // 2. exp(s - max)
    sub_bcast_cols_init(s.id, row_max.id);
    pass(count, e.dfb, e.id, [&](uint32_t t) {
        sub_tiles_bcast_cols(s.id, row_max.id, t, 0, 0);
        MATH((gr00t_sfpu::tile<gr00t_sfpu::exp_row>(0)));
    });
    s.dfb.pop_front(count);
    row_max.dfb.pop_front(1);
    e.dfb.wait_front(count);
    // 3. 1 / row sum
    reconfig_data_format(scaler, e.id);
    reduce_init<PoolType::SUM, ReduceDim::REDUCE_ROW>(e.id, scaler, rsum.id);
    tile_regs_acquire();
    reduce_row_tiles<PoolType::SUM>(e.id, scaler, count, 0);
    MATH((gr00t_sfpu::tile<gr00t_sfpu::recip_row>(0)));
    pack_dst0(rsum.dfb, rsum.id);
    reduce_uninit();
    rsum.dfb.wait_front(1);
    // 4. p = e * (1 / sum)
    reconfig_data_format(e.id, rsum.id);
    mul_bcast_cols_init(e.id, rsum.id);
    pack_reconfig_data_format(p.id);
    pass(count, p.dfb, p.id, [&](uint32_t t) { mul_tiles_bcast_cols(e.id, rsum.id, t, 0, 0); });
    e.dfb.pop_front(count);
    rsum.dfb.pop_front(1);
}

}  // namespace gr00t_compute
