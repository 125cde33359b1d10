#!/usr/bin/env bash
# Make the base images the tests need, without any registry.
#
#   local/busybox:tt-model   busybox-static rootfs (sh, httpd, wget, coreutils applets),
#                            /etc/passwd with root, /tmp 1777; about 2 MB.
#   local/python:tt-model    Debian bookworm (debootstrap --variant=minbase from the host's
#                            Debian mirror): python3 + python3-venv, the runtime link closure
#                            of the original's runtime stage, a uid-1000 user `tt`, and uv
#                            from PyPI at a pinned version and hash. The base of every
#                            Python-kind image here (both the builder and the runtime stage);
#                            see docs/packaging.md for how it differs from the original's
#                            tt-metalium dev image + ubuntu. Skipped with TT_MODEL_SKIP_PYTHON_BASE=1.
#   local/cc:tt-model        the same plus gcc, libc6-dev and ccache: the base of the test that
#                            compiles a fixture tt-metal build through the BuildKit build cache
#                            (crates/tt-model-package/tests/buildkit_cache.rs). Skipped with it.
#
# The rootfs tar is deterministic (sorted, mtime 0, uid/gid 0), and its sha256 is stored as
# an image label: a rerun whose tar is unchanged finds the label and does nothing (well under
# a second), so this is safe to call before every test run. `docker import` gives a new
# image id each time it runs, which is why we skip it rather than re-import.
#
# Needs: a running engine (docker CLI, any version; the API is negotiated), busybox-static.
set -euo pipefail

IMAGE="${TT_MODEL_BUSYBOX_IMAGE:-local/busybox:tt-model}"
LABEL="org.tenstorrent.tt-model.rootfs-sha256"

busybox_bin=$(command -v busybox || true)
if [ -z "$busybox_bin" ]; then
  echo "make-base-images: busybox is not installed; scripts/setup.sh installs it (or: apt-get install busybox-static)" >&2
  exit 1
fi
if ldd "$busybox_bin" >/dev/null 2>&1; then
  echo "make-base-images: $busybox_bin is dynamically linked; scripts/setup.sh installs busybox-static (or: apt-get install busybox-static)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/root" "$root/usr/bin" "$root/usr/sbin" "$root/sbin"
cp "$busybox_bin" "$root/bin/busybox"
chmod 0755 "$root/bin/busybox"
for applet in $("$busybox_bin" --list); do
  [ "$applet" = busybox ] && continue
  ln -sf busybox "$root/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
chmod 1777 "$root/tmp"

tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$root" -cf "$work/rootfs.tar" .
sum=$(sha256sum "$work/rootfs.tar" | cut -d' ' -f1)

current=$(docker image inspect --format "{{ index .Config.Labels \"$LABEL\" }}" "$IMAGE" 2>/dev/null || true)
if [ "$current" = "$sum" ]; then
  echo "make-base-images: $IMAGE is up to date (rootfs sha256 ${sum:0:12})"
else
  docker import \
    --change 'CMD ["/bin/sh"]' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change "LABEL $LABEL=$sum" \
    "$work/rootfs.tar" "$IMAGE" >/dev/null
  echo "make-base-images: built $IMAGE (rootfs sha256 ${sum:0:12})"
fi

if [ -n "${TT_MODEL_SKIP_PYTHON_BASE:-}" ]; then
  exit 0
fi
"$(dirname "$0")/make-python-base.sh"
TT_MODEL_PYTHON_IMAGE=local/cc:tt-model TT_MODEL_BASE_EXTRA_PACKAGES="gcc libc6-dev ccache" \
  "$(dirname "$0")/make-python-base.sh"
