#!/usr/bin/env bash
# The device backend's tests on the simulated Blackhole p150a (cargo feature `device`):
#   1. installs the simulator with ../shared/blackhole-sim/install.sh (idempotent; cached in
#      ~/.cache/blackhole-sim, about 4 minutes cold on 2 cores, a second when installed);
#   2. with its env.sh sourced and its venv active (the worker process finds ttnn there),
#      runs the tests behind the feature (on the workspace build README's test command makes),
#      the `#[ignore]`d simulator tests included (a plain `cargo test` reports those as ignored),
#      with GR00T_REQUIRE_SIM=1, so a missing simulator fails instead of skipping;
#   3. fails when a name filter matched no test (a rename must not turn into "0 passed").
#      Extra cargo args (e.g. --locked) are passed through.
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
# The workspace build with the feature, as README's test command makes it: no second build.
# The name filters select the device tests of gr00t-megakernel (lib, module `device`) and
# gr00t-server (integration). tt-blackhole's `device` module has a test of its own (the card
# choice, no simulator): skipped by name, so that `device::` selects the backend's tests alone.
filters=(device:: device_sim::)
skips=(--skip device::tests::card_selection_fails_clearly)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test "$@" --workspace --features gr00t-server/device --lib --tests -- \
  --include-ignored --nocapture --test-threads 1 "${filters[@]}" "${skips[@]}" 2>&1 | tee "$log" || status=$?
# Each filter must have selected tests: count the tests that started under it.
summary=""
for f in "${filters[@]}"; do
  n=$(grep -cE "^test [^ ]*${f}[^ ]* \.\.\. " "$log" || true)
  summary+=" ${f} ${n};"
  if [ "$n" = 0 ]; then
    echo "device-sim-tests: the filter \`${f}\` matched no test (renamed?)" >&2
    [ "$status" != 0 ] || status=1
  fi
done
echo "device-sim-tests: tests run per filter:${summary} cargo exit status ${status}"
exit "$status"
