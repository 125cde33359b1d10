// SPDX-License-Identifier: Apache-2.0
// One SFPU op of our library (sfpu_lib.h) over a stream of tiles: for each tile, copy CB 0's front tile
// into DST (unpack + datacopy on the FPU), run the op on it in the MATH thread's SFPU, pack DST to CB 16.
// The host pastes sfpu_lib.h in at GR00T_SFPU_LIB and defines GR00T_SFPU_ROW (the op's row routine,
// e.g. gr00t_sfpu::exp_row): one kernel build per op. Runtime arg 0: this core's number of tiles.
// CB ids: the kernel registry's (registry.rs), pasted in at GR00T_CB_IDS.
#include <cstdint>
#include "api/compute/common.h"
#include "api/compute/compute_kernel_hw_startup.h"
#include "api/compute/tile_move_copy.h"
#include "api/dataflow/dataflow_buffer.h"
#ifdef TRISC_MATH
#include "llk_math_eltwise_unary_sfpu_params.h"
using namespace ckernel;
//@@GR00T_SFPU_LIB@@
#endif
//@@GR00T_CB_IDS sfpu/eltwise_sfpu.cpp@@

void kernel_main() {
    const uint32_t num_tiles = get_arg_val<uint32_t>(0);
    DataflowBuffer dfb_in(cb_in);
    DataflowBuffer dfb_out(cb_out);
    compute_kernel_hw_startup(cb_in, cb_out);
    copy_init(cb_in);
    MATH((_llk_math_eltwise_unary_sfpu_init_once_()));
    for (uint32_t i = 0; i < num_tiles; ++i) {
        dfb_in.wait_front(1);
        tile_regs_acquire();
        copy_tile(cb_in, 0, 0);
        MATH((gr00t_sfpu::tile<GR00T_SFPU_ROW>(0)));
        tile_regs_commit();
        dfb_in.pop_front(1);
        dfb_out.reserve_back(1);
        tile_regs_wait();
        pack_tile(0, cb_out);
        tile_regs_release();
        dfb_out.push_back(1);
    }
}
