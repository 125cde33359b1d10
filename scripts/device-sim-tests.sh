#!/usr/bin/env bash
# The device backend's tests on the simulated Blackhole p150a (cargo feature `device`):
#   1. installs the simulator with ../shared/blackhole-sim/install.sh (idempotent; cached in
#      ~/.cache/blackhole-sim, about 4 minutes cold on 2 cores, a second when installed);
#   2. with its env.sh sourced and its venv active (the worker process finds ttnn there),
#      runs the tests behind the feature with GR00T_REQUIRE_SIM=1, so a missing simulator fails
#      instead of skipping. Extra cargo args (e.g. --locked) are passed through.
# Called by .ci/run; by hand: scripts/device-sim-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
sim=../shared/blackhole-sim
test -x "$sim/install.sh" || { echo "device-sim-tests: $sim/install.sh is missing: lay shared/ beside the clone" >&2; exit 1; }
prefix=${BLACKHOLE_SIM_PREFIX:-$HOME/.cache/blackhole-sim}
"$sim/install.sh" "$prefix"
# shellcheck disable=SC1091
source "$prefix/env.sh"
export VIRTUAL_ENV="$prefix/venv" PATH="$prefix/venv/bin:$PATH" GR00T_REQUIRE_SIM=1
cargo test "$@" -p gr00t-runtime --features device --lib megakernel::device -- --nocapture --test-threads 1
cargo test "$@" -p gr00t-server --features device --test integration -- --nocapture --test-threads 1 device_sim::
