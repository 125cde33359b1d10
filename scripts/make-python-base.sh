#!/usr/bin/env bash
# Make local/python:tt-model, the base of every Python-kind image built here, without any
# registry: a Debian rootfs made with debootstrap from the host's Debian mirror, imported with
# `docker import`.
#
# What it holds, and why (docs/packaging.md, "Images without a registry"):
#   * Debian bookworm, `--variant=minbase` (dpkg, apt, coreutils; no recommends);
#   * python3 + python3-venv (3.11): `uv venv --python 3.11` finds it, so no Python is
#     downloaded at build time;
#   * the runtime stage's link closure from the original's Dockerfile (libhwloc, libnuma,
#     libatomic, libudev, libcap2, zlib, the sfpi JIT's libmpc/mpfr/gmp/zstd, libevent,
#     libsndfile1, ca-certificates), so the runtime stage needs no apt. Not libgl1: it is
#     there for OpenCV and pulls Mesa's DRI drivers with LLVM (about 200 MB, half the image);
#     nothing built here imports cv2;
#   * uv from PyPI, pinned by version and wheel sha256 (the original's dev image ships uv);
#   * a uid-1000 user `tt` (the runtime stage rewrites it the same way on any base);
#   * the host's CA bundle added to Debian's (and UV_SYSTEM_CERTS=1, so uv reads it): builds
#     reach PyPI through the same TLS-inspecting proxy the host trusts, if there is one.
#
# Cached: the image carries the sha256 of its recipe (the lines below that decide what goes
# in) as a label; a rerun that finds the image with the same recipe does nothing. Debian
# packages follow the mirror, so the rootfs is not bit-reproducible; its tar sha256 and the
# dpkg list are recorded (label, /usr/local/share/tt-model/base-packages.txt) for provenance.
#
# Needs: root (debootstrap chroots), debootstrap, a running engine, python3 with pip on the
# host (to fetch uv's wheel with its hash checked). About 2 minutes cold, well under a second
# when cached.
set -euo pipefail

IMAGE="${TT_MODEL_PYTHON_IMAGE:-local/python:tt-model}"
# More Debian packages on top (make-base-images.sh makes local/cc:tt-model with a compiler and
# ccache this way, for the build-cache test); part of the recipe.
read -r -a EXTRA <<<"${TT_MODEL_BASE_EXTRA_PACKAGES:-}"
RECIPE_LABEL="org.tenstorrent.tt-model.recipe-sha256"
ROOTFS_LABEL="org.tenstorrent.tt-model.rootfs-sha256"
SUITE=bookworm
PACKAGES=(
  python3 python3-venv ca-certificates
  libhwloc15 libnuma1 libatomic1 libudev1 libcap2 zlib1g
  libmpc3 libmpfr6 libgmp10 libzstd1
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libsndfile1
  ${EXTRA[@]+"${EXTRA[@]}"}
)
UV_VERSION=0.13.9
# The wheels' sha256 as PyPI serves them (pip checks them with --require-hashes).
UV_HASHES=(
  d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19 # manylinux_2_17_x86_64
  5435c5ce14a56431208ca0996416d310f1598e8c2c8ba707688985a16bb82dbe # manylinux_2_17_aarch64
)
PASSWD_TT='tt:x:1000:1000:tt-model runtime user:/home/tt:/bin/sh'
HOST_CA="${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}"
ca_sum=$( (cat "$HOST_CA" 2>/dev/null || true) | sha256sum | cut -d' ' -f1)
RECIPE="v2 $SUITE minbase ${PACKAGES[*]} uv==$UV_VERSION ${UV_HASHES[*]} $PASSWD_TT ca=$ca_sum"
recipe_sum=$(printf '%s' "$RECIPE" | sha256sum | cut -d' ' -f1)

current=$(docker image inspect --format "{{ index .Config.Labels \"$RECIPE_LABEL\" }}" "$IMAGE" 2>/dev/null || true)
if [ "$current" = "$recipe_sum" ]; then
  echo "make-base-images: $IMAGE is up to date (recipe sha256 ${recipe_sum:0:12})"
  exit 0
fi

if [ "$(id -u)" != 0 ]; then
  echo "make-base-images: building $IMAGE needs root (debootstrap); run scripts/setup.sh as root" >&2
  exit 1
fi
for tool in debootstrap python3; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "make-base-images: $tool is not installed; scripts/setup.sh installs it" >&2
    exit 1
  fi
done

# The Debian mirror the host's apt uses (deb822 or one-line sources), else Debian's CDN.
mirror=$(grep -hoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list.d/*.sources \
  /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -1 | awk '{print $2}' || true)
mirror="${TT_MODEL_DEBIAN_MIRROR:-${mirror:-http://deb.debian.org/debian}}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
echo "make-base-images: debootstrap $SUITE from $mirror (${#PACKAGES[@]} packages and their dependencies)"
include=$(IFS=,; echo "${PACKAGES[*]}")
if ! debootstrap --variant=minbase --include="$include" "$SUITE" "$root" "$mirror" >"$work/debootstrap.log" 2>&1; then
  tail -30 "$work/debootstrap.log" >&2
  cat "$root/debootstrap/debootstrap.log" 2>/dev/null | tail -30 >&2 || true
  echo "make-base-images: debootstrap failed (log above)" >&2
  exit 1
fi

# uv from PyPI, hash-checked.
for h in "${UV_HASHES[@]}"; do printf -- '--hash=sha256:%s ' "$h"; done |
  sed "s/^/uv==$UV_VERSION /" >"$work/uv-req.txt"
python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes -r "$work/uv-req.txt" -d "$work/uv"
python3 -m zipfile -e "$work"/uv/uv-*.whl "$work/uv/x"
install -m 0755 "$work/uv/x/uv-$UV_VERSION.data/scripts/uv" "$work/uv/x/uv-$UV_VERSION.data/scripts/uvx" "$root/usr/local/bin/"

# The host's trusted CAs join Debian's (a superset on a host behind a TLS-inspecting proxy;
# duplicates are harmless).
if [ -s "$HOST_CA" ]; then
  install -m 0644 "$HOST_CA" "$root/usr/local/share/ca-certificates/host-bundle.crt"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
fi

# The runtime user and its dirs; the same lines runtime_setup.sh writes on any base.
sed -i '/^[^:]*:[^:]*:1000:/d' "$root/etc/passwd"
sed -i '/^[^:]*:[^:]*:1000:/d' "$root/etc/group"
echo "$PASSWD_TT" >>"$root/etc/passwd"
echo 'tt:x:1000:' >>"$root/etc/group"
mkdir -p "$root/home/tt"
chown 1000:1000 "$root/home/tt"

# Provenance, then what an image never needs: apt's caches and lists, logs, man pages.
mkdir -p "$root/usr/local/share/tt-model"
chroot "$root" dpkg-query -W -f '${Package}=${Version}\n' | sort >"$root/usr/local/share/tt-model/base-packages.txt"
echo "uv==$UV_VERSION" >>"$root/usr/local/share/tt-model/base-packages.txt"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/* \
  "$root"/usr/share/man "$root"/usr/share/info "$root"/debootstrap
find "$root/var/cache" "$root/tmp" -mindepth 1 -delete 2>/dev/null || true
chmod 1777 "$root/tmp"

tar --sort=name --mtime=@0 --numeric-owner -C "$root" -cf "$work/rootfs.tar" .
rootfs_sum=$(sha256sum "$work/rootfs.tar" | cut -d' ' -f1)
docker import \
  --change 'CMD ["/bin/sh"]' \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 UV_SYSTEM_CERTS=1' \
  --change "LABEL $RECIPE_LABEL=$recipe_sum $ROOTFS_LABEL=$rootfs_sum" \
  "$work/rootfs.tar" "$IMAGE" >/dev/null
size=$(du -m "$work/rootfs.tar" | cut -f1)
echo "make-base-images: built $IMAGE (recipe sha256 ${recipe_sum:0:12}, rootfs ${size} MB, sha256 ${rootfs_sum:0:12})"
