//! The plan's packer (`plan::program`), which the device backend runs for every denoising step's
//! graph: the full-size step's 128 matmul steps packed for a p150a's 11 × 10 grid and the
//! simulator's 13 × 10 (one program each, 9 phase groups).

use divan::Bencher;
use tt_blackhole::ArenaDtype;
use tt_blackhole::dims::DitDims;
use tt_blackhole::plan::build_plan;

fn main() {
    divan::main();
}

#[divan::bench(args = [[11, 10], [13, 10]])]
fn full_size_step(b: Bencher, grid: [usize; 2]) {
    let plan = build_plan(&DitDims::FULL, ArenaDtype::Bfp8B).unwrap();
    let needs = plan.step_needs();
    b.bench(|| tt_blackhole::plan::program::pack_programs(grid, &needs, true).unwrap());
}
