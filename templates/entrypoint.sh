#!/bin/sh
# tt-model image entrypoint: prepare the runtime dirs, then become the server (PID 1 under
# docker-init), so `docker stop`'s SIGTERM reaches it.
set -eu
export TT_METAL_CACHE="${TT_METAL_CACHE:-/cache}"
export TT_METAL_LOGS_PATH="${TT_METAL_LOGS_PATH:-$HOME/work/logs}"
mkdir -p "$TT_METAL_CACHE" "$TT_METAL_LOGS_PATH"
# VLLM_PLUGINS is an allow-list: an inherited value silently disables the parser plugins.
unset VLLM_PLUGINS
if [ -z "${TT_VLLM_BUILTIN_MODELS:-}" ]; then unset TT_VLLM_BUILTIN_MODELS; fi
cd "$HOME/work"
exec "$@"
