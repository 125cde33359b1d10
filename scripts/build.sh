#!/usr/bin/env bash
# Build the release binaries, the `tt-model` CLI and `gr00t-server` (the runtime the GR00T image
# ships), in ONE cargo invocation, exactly as `tt-model package` builds an image's binary
# (crates/tt-model-package/src/cargo_bin.rs): release, `--locked`, every workspace member
# selected (the workspace's dependency features), `--bin` for each binary, static glibc, the host
# triple, no debuginfo.
#
#   scripts/build.sh                  # both
#   scripts/build.sh gr00t-server     # only these binaries
#
# Why one invocation with package's flags: every dependency unit is compiled once for both
# binaries, and `package`'s own build of gr00t-server afterwards compiles nothing. With
# `cargo build --release -p tt-model` beside package's static `-p gr00t-server` build, the two
# shared no unit: other flags, another profile, other features.
#
# The binaries are ${CARGO_TARGET_DIR:-target}/<host triple>/release/<bin>; target/bin/<bin> links
# to each. The CLI built this way is statically linked too: glibc then resolves host names
# through the system's NSS modules, which must be of the glibc it was linked with, so use it on
# the machine that built it (`cargo build --release -p tt-model` gives a dynamically linked CLI
# to copy to other hosts). TT_MODEL_CARGO_DEBUG=1 keeps the release profile's line tables, as
# it does for package.
set -euo pipefail
cd "$(dirname "$0")/.."
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(tt-model gr00t-server)

triple=$(rustc -vV | sed -n 's/^host: //p')
# The profile overrides of cargo_bin.rs's profile_env.
if [ "${TT_MODEL_CARGO_DEBUG:-}" = 1 ]; then
  unset CARGO_PROFILE_RELEASE_DEBUG CARGO_PROFILE_RELEASE_STRIP
else
  export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=debuginfo
fi
args=()
for b in "${bins[@]}"; do args+=(--bin "$b"); done
# With --target, RUSTFLAGS reaches only the target's artifacts: build scripts and proc macros
# stay dynamic, as they must. CARGO_ENCODED_RUSTFLAGS would override RUSTFLAGS: package drops it.
unset CARGO_ENCODED_RUSTFLAGS
RUSTFLAGS="${RUSTFLAGS:+$RUSTFLAGS }-C target-feature=+crt-static" \
  cargo build --release --locked --workspace "${args[@]}" --target "$triple"

target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target/bin"
for b in "${bins[@]}"; do
  ln -sfn "../$triple/release/$b" "$target/bin/$b"
  echo "build: $target/bin/$b -> $target/$triple/release/$b"
done
