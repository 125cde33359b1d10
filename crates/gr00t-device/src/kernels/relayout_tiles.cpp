// SPDX-License-Identifier: Apache-2.0
// Column relayout between two interleaved TILE tensors on the device (RISCV_1, no compute kernel): the
// block's activations change layout between ops without leaving the device. The step graph's head split
// and merge and its AdaLN split now ride in the attention and LayerNorm readers and writers; this program
// is left for the zero-filled attention output of a cross kind with no keys (no segments) and for
// relayouts a later graph may want. hd and D need not be whole tiles (the tiny
// config's hd = 10, D = 40), so the general copy is per element, in the tile's face order. A segment
// whose columns and length are whole faces (multiples of 16: the full-size hd = 48 and D = 1536) is
// copied face by face instead, each 16 x 16 face one NoC read straight from DRAM into its place (a
// face is contiguous in a tile page): no per-element work on the RISC-V.
//
// A segment copies `len` columns of a source tile row (32 rows) to a destination tile row. Segments come
// as arithmetic progressions (k = 0 .. count-1):
//   dst tile row = dr0 + k*drs, dst col = dc0 + k*dcs, src tile row = sr0 + k*srs, src col = sc0 + k*scs.
// This core owns dst tile rows [first, first + rows): it zero-fills them in L1, applies the segments that
// land there, and writes them out. Unwritten columns stay 0 (padding the next op relies on).
// Runtime args: src addr, dst addr, src width (tiles), dst width (tiles), element bytes (2 bf16, 4 fp32),
// first dst tile row, dst tile rows, progressions, then 10 words each: count dr0 drs dc0 dcs sr0 srs sc0 scs
// len. Compile-time args: src and dst accessor args. CBs: 0 the dst rows (rows * dst width pages), 1 the
// source tiles of one segment (its span in tiles + 1 pages).
#include <cstdint>
#include "api/dataflow/dataflow_api.h"
#include "api/dataflow/dataflow_buffer.h"
#include "api/tensor/noc_traits.h"

//@@GR00T_TILE_COLUMNS@@
//@@GR00T_CB_IDS relayout_tiles.cpp@@

void kernel_main() {
    const uint32_t src_addr = get_arg_val<uint32_t>(0);
    const uint32_t dst_addr = get_arg_val<uint32_t>(1);
    const uint32_t src_w = get_arg_val<uint32_t>(2);
    const uint32_t dst_w = get_arg_val<uint32_t>(3);
    const uint32_t elem = get_arg_val<uint32_t>(4);
    const uint32_t first = get_arg_val<uint32_t>(5);
    const uint32_t rows = get_arg_val<uint32_t>(6);
    const uint32_t progs = get_arg_val<uint32_t>(7);
    constexpr auto src_args = TensorAccessorArgs<0>();
    constexpr auto dst_args = TensorAccessorArgs<src_args.next_compile_time_args_offset()>();
    const auto src = TensorAccessor(src_args, src_addr);
    const auto dst = TensorAccessor(dst_args, dst_addr);
    const uint32_t page = 1024 * elem;
    DataflowBuffer dfb_dst(cb_dst), dfb_src(cb_src);
    const uint32_t dst_l1 = dfb_dst.get_write_ptr();
    const uint32_t src_l1 = dfb_src.get_write_ptr();

    // Zero the dst rows: one zero page by stores, copied over them by the NoC (RISC-V stores to L1
    // are slow on the simulator and word-by-word on silicon).
    volatile uint32_t* z = reinterpret_cast<volatile uint32_t*>(src_l1);
    for (uint32_t i = 0; i < page / 4; ++i) {
        z[i] = 0;
    }
    for (uint32_t t = 0; t < rows * dst_w; ++t) {
        noc_async_read(get_noc_addr(my_x[noc_index], my_y[noc_index], src_l1), dst_l1 + t * page, page);
    }
    noc_async_read_barrier();
    for (uint32_t p = 0; p < progs; ++p) {
        const uint32_t a = 8 + p * 10;
        const uint32_t count = get_arg_val<uint32_t>(a);
        for (uint32_t k = 0; k < count; ++k) {
            const uint32_t dr = get_arg_val<uint32_t>(a + 1) + k * get_arg_val<uint32_t>(a + 2);
            if (dr < first || dr >= first + rows) {
                continue;
            }
            const uint32_t dc = get_arg_val<uint32_t>(a + 3) + k * get_arg_val<uint32_t>(a + 4);
            const uint32_t sr = get_arg_val<uint32_t>(a + 5) + k * get_arg_val<uint32_t>(a + 6);
            const uint32_t sc = get_arg_val<uint32_t>(a + 7) + k * get_arg_val<uint32_t>(a + 8);
            const uint32_t len = get_arg_val<uint32_t>(a + 9);
            const uint32_t dbase = dst_l1 + (dr - first) * dst_w * page;
            if (((sc | dc | len) & 15) == 0) {
                const uint32_t face = page / 4;
                for (uint32_t g = 0; g < len; g += 16) {
                    const uint32_t s = sc + g, d = dc + g;
                    for (uint32_t half = 0; half < 2; ++half) {
                        const uint64_t from = src.get_noc_addr(sr * src_w + (s >> 5), (half * 2 + ((s >> 4) & 1)) * face);
                        noc_async_read(from, dbase + (d >> 5) * page + (half * 2 + ((d >> 4) & 1)) * face, face);
                    }
                }
                noc_async_read_barrier();
                continue;
            }
            const uint32_t t0 = sc >> 5, t1 = (sc + len - 1) >> 5;
            for (uint32_t t = t0; t <= t1; ++t) {
                noc_async_read_page(sr * src_w + t, src, src_l1 + (t - t0) * page);
            }
            noc_async_read_barrier();
            for (uint32_t j = 0; j < len; ++j) {
                const uint32_t s = sc + j - (t0 << 5), d = dc + j;
                const uint32_t sp = src_l1 + (s >> 5) * page, dp = dbase + (d >> 5) * page;
                for (uint32_t r = 0; r < 32; ++r) {
                    const uint32_t so = tile_offset(r, s & 31), dof = tile_offset(r, d & 31);
                    if (elem == 4) {
                        reinterpret_cast<volatile uint32_t*>(dp)[dof] =
                            reinterpret_cast<volatile uint32_t*>(sp)[so];
                    } else {
                        reinterpret_cast<volatile uint16_t*>(dp)[dof] =
                            reinterpret_cast<volatile uint16_t*>(sp)[so];
                    }
                }
            }
        }
    }
    for (uint32_t r = 0; r < rows; ++r) {
        for (uint32_t t = 0; t < dst_w; ++t) {
            noc_async_write_page((first + r) * dst_w + t, dst, dst_l1 + (r * dst_w + t) * page);
        }
    }
    noc_async_write_barrier();
}
