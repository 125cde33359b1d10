#!/usr/bin/env bash
# Put a tiny GR00T N1.6 checkpoint into the Hugging Face hub cache at the revision
# examples/gr00t-tiny pins, so `tt-model serve … --local-only` serves it without any Hub:
# the golden tiny checkpoint (../shared/golden/gr00t-n16-tiny/case1: NVIDIA's reference code on
# a tiny random config), its Qwen tokenizer files under tokenizer/, and a demo under demo/
# (a seeded request on the golden frame, its expected actions made by `gr00t-server demo` on the
# f32 CPU reference) for GET /demo and the boot self-check.
#
#   scripts/gr00t-tiny-weights.sh [GR00T_SERVER_BINARY]
#
# The snapshot is written beside its final place and renamed into it (never half a snapshot);
# a rerun replaces it. Needs python3 (to write the request JSON) and a gr00t-server binary (the
# one `tt-model package` built, else `cargo build --release -p gr00t-server`).
set -euo pipefail
cd "$(dirname "$0")/.."
golden=${GR00T_TINY_GOLDEN:-../shared/golden/gr00t-n16-tiny}
[ -d "$golden/case1" ] || { echo "gr00t-tiny-weights: no golden checkpoint at $golden/case1 (set GR00T_TINY_GOLDEN)" >&2; exit 1; }
manifest=examples/gr00t-tiny/tt-model.yaml
repo=$(sed -n 's/^  repo: //p' "$manifest" | head -1)
rev=$(sed -n 's/^  revision: //p' "$manifest" | head -1)
server=${1:-}
if [ -z "$server" ]; then
  for c in target/x86_64-unknown-linux-gnu/release/gr00t-server target/release/gr00t-server; do
    [ -x "$c" ] && { server=$c; break; }
  done
fi
if [ -z "$server" ]; then
  cargo build --release --locked -p gr00t-server
  server=target/release/gr00t-server
fi
hub=${HF_HUB_CACHE:-${HF_HOME:-$HOME/.cache/huggingface}/hub}
root="$hub/models--${repo%%/*}--${repo#*/}"
mkdir -p "$root/snapshots" "$root/refs"
tmp=$(mktemp -d "$root/snapshots/.partial-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
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
rm -rf "$root/snapshots/$rev"
mv "$tmp" "$root/snapshots/$rev"
trap - EXIT
printf '%s' "$rev" > "$root/refs/main"
echo "gr00t-tiny-weights: $repo@${rev:0:8} in $root/snapshots/$rev"
