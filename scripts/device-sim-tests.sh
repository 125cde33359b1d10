#!/usr/bin/env bash
# The device backend's tests on the simulated Blackhole p150a (gr00t-server's feature `device`):
#   1. installs the simulator with ../shared/blackhole-sim/install.sh (idempotent; cached in
#      ~/.cache/blackhole-sim, about 4 minutes cold on 2 cores, a second when installed);
#   2. with its env.sh sourced and its venv active (the worker process finds ttnn there), runs
#      every test of the crate gr00t-device (its unit tests) and gr00t-server's `device_sim::`
#      tests, the `#[ignore]`d simulator tests included (a plain `cargo test` reports those as
#      ignored), with GR00T_REQUIRE_SIM=1, so a missing simulator fails instead of skipping;
#   3. fails when a test binary ran no test (a rename must not turn into "0 passed").
# The tests named `sim_long_*` run only with `--long`, alone: a full-width layer over a full view
# or prompt (CI runs the same layer over fewer tokens), the full-size block on the simulator's
# own grid (CI runs it on a card's), and two forwards CI runs inside other tests.
# Extra args (e.g. --locked) go to cargo. Called by .ci/run; by hand: scripts/device-sim-tests.sh
set -euo pipefail
cd "$(dirname "$0")/.."
long=0
cargo_args=()
for a in "$@"; do
  if [ "$a" = --long ]; then long=1; else cargo_args+=("$a"); fi
done
sim=../shared/blackhole-sim
test -x "$sim/install.sh" || { echo "device-sim-tests: $sim/install.sh is missing: lay shared/ beside the clone" >&2; exit 1; }
prefix=${BLACKHOLE_SIM_PREFIX:-$HOME/.cache/blackhole-sim}
"$sim/install.sh" "$prefix"
# shellcheck disable=SC1091
source "$prefix/env.sh"
export VIRTUAL_ENV="$prefix/venv" PATH="$prefix/venv/bin:$PATH" GR00T_REQUIRE_SIM=1
# The workspace build with the feature, as README's test command makes it (no second build: a
# `-p` would unify features over fewer packages), and the two test binaries it made.
bins=$(cargo test "${cargo_args[@]}" --workspace --features gr00t-server/device --no-run \
  --message-format=json-render-diagnostics | python3 -c '
import json, sys
want = {("gr00t_device", "lib"): "device", ("integration", "test"): "server"}
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable"):
        continue
    t = m["target"]
    key = (t["name"], t["kind"][0])
    if key in want and (key[0] != "integration" or "/gr00t-server/" in t["src_path"]):
        print(want[key], m["executable"])
')
exe_of() { awk -v k="$1" '$1 == k { print $2 }' <<<"$bins"; }
device_exe=$(exe_of device)
server_exe=$(exe_of server)
[ -n "$device_exe" ] && [ -n "$server_exe" ] || { echo "device-sim-tests: the build made no gr00t-device or gr00t-server test binary" >&2; exit 1; }
log=$(mktemp)
last=$(mktemp)
trap 'rm -f "$log" "$last"' EXIT
status=0
# Each binary runs from its package's directory, as `cargo test` runs it; every line is stamped
# with the seconds since the run began (where the CI time goes: a test's first line and the
# next test's bound it); the binaries' "test result:" lines are left as cargo prints them, for
# .ci/run's summary.
run() {
  local dir=$1 exe=$2
  shift 2
  : >"$last"
  (cd "$dir" && "$exe" --nocapture --test-threads 1 "$@") 2>&1 |
    while IFS= read -r line; do
      case $line in "test result:"*) printf '%s\n' "$line" ;; *) printf '[+%ds] %s\n' "$SECONDS" "$line" ;; esac
    done | tee -a "$log" "$last"
}
# The tests the last binary run started: its "running N tests" line (a test's own output can
# split the harness's "test name ... " line, so counting those lines undercounts).
ran() { grep -oE "running [0-9]+ tests?" "$last" | head -1 | grep -oE "[0-9]+" || echo 0; }
summary=""
if [ "$long" = 1 ]; then
  run crates/gr00t-device "$device_exe" --ignored sim_long_ || status=$?
  n_long=$(ran)
  run crates/gr00t-server "$server_exe" --ignored device_sim::sim_long_ || status=$?
  n_long=$((n_long + $(ran)))
  summary=" sim_long_ ${n_long};"
  if [ "$n_long" = 0 ]; then
    echo "device-sim-tests: no sim_long_ test ran (renamed?)" >&2
    [ "$status" != 0 ] || status=1
  fi
else
  run crates/gr00t-device "$device_exe" --include-ignored --skip sim_long_ || status=$?
  n_device=$(ran)
  run crates/gr00t-server "$server_exe" --include-ignored device_sim:: --skip sim_long_ || status=$?
  n_server=$(ran)
  summary=" gr00t-device ${n_device}; device_sim:: ${n_server};"
  if [ "$n_device" = 0 ] || [ "$n_server" = 0 ]; then
    echo "device-sim-tests: a test binary ran no test (renamed?)" >&2
    [ "$status" != 0 ] || status=1
  fi
fi
echo "device-sim-tests: tests run:${summary} exit status ${status}"
exit "$status"
