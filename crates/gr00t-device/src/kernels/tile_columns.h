// SPDX-License-Identifier: Apache-2.0
// Tile geometry for our data-movement kernels (pasted in at the marker line `//@@GR00T_TILE_COLUMNS@@` by
// the host, as the SFPU library is into compute kernels: the JIT gets one source string per kernel).
// Shared by the attention reader (head split), its writer (head merge) and the relayout program.
namespace {
// Element (r, c) of a 32x32 tile: 4 faces of 16x16, row-major within a face, faces in row-major order.
inline uint32_t tile_offset(uint32_t r, uint32_t c) {
    return (((r >> 4) << 1) + (c >> 4)) * 256 + ((r & 15) << 4) + (c & 15);
}

// Columns sc .. sc + n of the bf16 tiles at src (tile after tile, as one wide tile row) to columns
// dc .. dc + n of those at dst, all 32 rows. Per chunk of up to 32 copies the offsets are computed
// once, so the per-element work is a load and a store (the simulated RISC-V is slow).
inline void copy_columns(uint32_t src, uint32_t sc, uint32_t dst, uint32_t dc, uint32_t n) {
    uint32_t so[32], dof[32];
    // Even columns and an even count (hd = 10): two bf16 at a time, as one 32-bit word (a pair never
    // straddles a face), half the L1 accesses.
    const uint32_t step = ((sc | dc | n) & 1) == 0 ? 2 : 1;
    volatile uint16_t* sp = reinterpret_cast<volatile uint16_t*>(src);
    volatile uint16_t* dp = reinterpret_cast<volatile uint16_t*>(dst);
    volatile uint32_t* sw = reinterpret_cast<volatile uint32_t*>(src);
    volatile uint32_t* dw = reinterpret_cast<volatile uint32_t*>(dst);
    for (uint32_t j0 = 0; j0 < n; j0 += 32 * step) {
        const uint32_t len = (n - j0 < 32 * step ? n - j0 : 32 * step) / step;
        for (uint32_t j = 0; j < len; ++j) {
            const uint32_t s = sc + j0 + j * step, d = dc + j0 + j * step;
            so[j] = ((s >> 5) * 1024 + tile_offset(0, s & 31)) / step;
            dof[j] = ((d >> 5) * 1024 + tile_offset(0, d & 31)) / step;
        }
        for (uint32_t r = 0; r < 32; ++r) {
            const uint32_t rb = tile_offset(r, 0) / step;
            if (step == 2) {
                for (uint32_t j = 0; j < len; ++j) {
                    dw[rb + dof[j]] = sw[rb + so[j]];
                }
            } else {
                for (uint32_t j = 0; j < len; ++j) {
                    dp[rb + dof[j]] = sp[rb + so[j]];
                }
            }
        }
    }
}

}  // namespace
