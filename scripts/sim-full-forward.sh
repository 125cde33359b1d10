#!/usr/bin/env bash
# The full-size N1.6 forward (32 DiT blocks, 4 steps) with the whole action head on the
# simulated p150a, against the CPU emulator: prints the time it took and the PCC
# (docs/benchmarks.md records them). Over an hour on a 2-core box (one full-size block's step
# takes about 37 s on the simulator); never part of CI. By hand: scripts/sim-full-forward.sh
# The test: crates/gr00t-device/tests/sim_full_forward.rs.
set -euo pipefail
cd "$(dirname "$0")/.."
sim=../shared/blackhole-sim
test -x "$sim/install.sh" || { echo "sim-full-forward: $sim/install.sh is missing: lay shared/ beside the clone" >&2; exit 1; }
prefix=${BLACKHOLE_SIM_PREFIX:-$HOME/.cache/blackhole-sim}
"$sim/install.sh" "$prefix"
# shellcheck disable=SC1091
source "$prefix/env.sh"
export VIRTUAL_ENV="$prefix/venv" PATH="$prefix/venv/bin:$PATH"
cargo test --locked --workspace --features gr00t-server/device --test integration -- \
  --ignored --exact --nocapture sim_full_forward::sim_full_size_forward_with_the_head_on_the_device
