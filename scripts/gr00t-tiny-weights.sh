#!/usr/bin/env bash
# Put a tiny GR00T N1.6 checkpoint into the Hugging Face hub cache at the revision
# examples/gr00t-tiny pins, so `tt-model serve … --local-only` serves it without any Hub.
#
#   scripts/gr00t-tiny-weights.sh            # a random checkpoint: gr00t-server make-checkpoint --seed 0
#   GR00T_TINY_GOLDEN=../shared/golden/gr00t-n16-tiny scripts/gr00t-tiny-weights.sh
#                                            # the golden tiny checkpoint (NVIDIA's reference code on a
#                                            # tiny random config) with the real Qwen tokenizer files
#
# Either way the snapshot holds config, sharded safetensors + index, the GR1 processor files,
# tokenizer/ and demo/ (request.json + expected.json made by this build's f32 CPU reference, for
# GET /demo and the boot self-check). The revision is only the name the manifest pins: a
# snapshot placed by hand is served as it is (--local-only checks that it is there, nothing
# more). The snapshot is written beside its place and renamed into it; a rerun replaces it.
#
# gr00t-server is built exactly as `tt-model package` builds it for the image (scripts/build.sh:
# release, locked, the workspace's features, static, host triple, no debuginfo), so the package
# step that follows finds it built.
set -euo pipefail
cd "$(dirname "$0")/.."
manifest=examples/gr00t-tiny/tt-model.yaml
repo=$(sed -n 's/^  repo: //p' "$manifest" | head -1)
rev=$(sed -n 's/^  revision: //p' "$manifest" | head -1)

scripts/build.sh gr00t-server
server="${CARGO_TARGET_DIR:-target}/bin/gr00t-server"

hub=${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}
root="$hub/models--${repo%%/*}--${repo#*/}"
mkdir -p "$root/snapshots" "$root/refs"
tmp=$(mktemp -d "$root/snapshots/.partial-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
if [ -n "${GR00T_TINY_GOLDEN:-}" ]; then
  golden=$GR00T_TINY_GOLDEN
  [ -d "$golden/case1" ] || { echo "gr00t-tiny-weights: no golden checkpoint at $golden/case1" >&2; exit 1; }
  for f in config.json eagle_config.json model.safetensors model.safetensors.index.json processor_config.json statistics.json embodiment_id.json; do
    cp "$golden/case1/$f" "$tmp/"
  done
  cp -r "$golden/tokenizer" "$tmp/tokenizer"
  python3 - "$golden/case1" "$tmp/request.json" <<'PY'
import base64, json, sys
case, out = sys.argv[1], sys.argv[2]
obs = json.load(open(f"{case}/observation.json"))
png = base64.b64encode(open(f"{case}/observation.png", "rb").read()).decode()
json.dump({"images": {obs["video_key"]: png}, "state": obs["state"],
           "instruction": obs["instruction"], "seed": 42}, open(out, "w"))
PY
  env -u GR00T_DEMO_DIR -u GR00T_TOKENIZER_DIR RUST_LOG=warn \
    "$server" demo --model-dir "$tmp" --request "$tmp/request.json" --out "$tmp/demo"
  rm "$tmp/request.json"
  what="the golden tiny checkpoint from $golden"
else
  rmdir "$tmp"
  "$server" make-checkpoint --config tiny --seed 0 --out "$tmp"
  what="a random tiny checkpoint (make-checkpoint --seed 0)"
fi
rm -rf "$root/snapshots/$rev"
mv "$tmp" "$root/snapshots/$rev"
trap - EXIT
printf '%s' "$rev" > "$root/refs/main"
echo "gr00t-tiny-weights: $what as $repo@${rev:0:8} in $root/snapshots/$rev"
