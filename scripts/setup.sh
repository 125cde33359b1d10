#!/usr/bin/env bash
# The one set-up command on a fresh Debian/Ubuntu machine, for the main job and the tests:
#   1. the Debian packages they need (busybox-static for the base image, docker.io when no
#      engine is installed, libc6-dev for the statically linked Rust binaries images ship,
#      git, debootstrap and python3-pip for the Python base image, docker-registry for the
#      registry round trip, whose test starts its own instance on a free loopback port),
#      installed with apt-get as root or through sudo;
#   2. a running Docker engine (scripts/ensure-docker.sh);
#   3. the local base images (scripts/make-base-images.sh; no registry is ever used).
# Safe to rerun: each step does nothing when its work is done.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v dockerd >/dev/null 2>&1 || command -v docker >/dev/null 2>&1 || need+=(docker.io)
[ -e "/usr/lib/$(uname -m)-linux-gnu/libc.a" ] || need+=(libc6-dev)
command -v git >/dev/null 2>&1 || need+=(git)
# The Python base image (scripts/make-python-base.sh): debootstrap, and pip to fetch uv's wheel.
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
# A real OCI registry (the CNCF distribution server) for `push`/`pull` with image.registry.
[ -x /usr/bin/docker-registry ] || need+=(docker-registry)
# A venv for kubernetes-validate (the fleet checks of `serve --print k8s`).
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
# numpy for the device worker's own Python, which a default test runs over a stand-in ttnn on
# the PATH's python3 (gr00t-device, src/worker_replay_tests.rs): Debian's
# package for Debian's python3, pip (below) for another one (pyenv's).
numpy_by_pip=0
if ! python3 -c 'import numpy' >/dev/null 2>&1; then
  if [ "$(readlink -f "$(command -v python3)")" = "$(readlink -f /usr/bin/python3)" ]; then
    need+=(python3-numpy)
  else
    numpy_by_pip=1
  fi
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    sudo=()
  elif command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "setup: missing Debian packages: ${need[*]}; install them as root: apt-get install -y ${need[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq "${need[@]}"
fi

if [ "$numpy_by_pip" = 1 ]; then
  echo "setup: installing numpy for $(command -v python3)"
  python3 -m pip install -q "numpy>=1.24,<3"
fi

# kubernetes-validate (PyPI; bundles Kubernetes' published schemas, runs offline) for the
# `serve --print k8s` fleet tests, which find it through TT_MODEL_K8S_VALIDATE (default: here).
# 1.37.x holds the schemas of 1.34 (resource.k8s.io/v1, the DRA claims a fleet renders) and
# newer; a venv holding another version (CI caches it) is upgraded in place.
k8s_validate_version=1.37.0
k8s_venv="$HOME/.cache/tt-model-ci/k8s-venv"
if ! "$k8s_venv/bin/pip" show kubernetes-validate 2>/dev/null | grep -qx "Version: $k8s_validate_version"; then
  echo "setup: installing kubernetes-validate $k8s_validate_version into $k8s_venv"
  python3 -m venv "$k8s_venv"
  "$k8s_venv/bin/pip" install -q "kubernetes-validate==$k8s_validate_version"
fi

# Tenstorrent's `tt` CLI (PyPI `tenstorrent`, pinned; newer typer breaks its import) for the
# end-to-end test behind it (crates/tt-model/tests/tt_cli_e2e.rs), which finds it through
# TT_MODEL_TT_CLI (default: here).
tt_venv="$HOME/.cache/tt-model-ci/tt-venv"
if ! "$tt_venv/bin/tt" --version >/dev/null 2>&1; then
  echo "setup: installing the tt CLI into $tt_venv"
  python3 -m venv "$tt_venv"
  "$tt_venv/bin/pip" install -q tenstorrent==1.2.1 typer==0.27.2
fi

scripts/ensure-docker.sh
scripts/make-base-images.sh
