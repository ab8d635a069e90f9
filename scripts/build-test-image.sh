#!/usr/bin/env bash
# Builds the local image `wharf-sandbox:test` used by the Docker integration tests.
#
# No image can be pulled on the build machines, so the image is built FROM scratch with a
# static busybox from Debian's `busybox-static` package: /bin/busybox plus its applet
# symlinks (sh, setsid, kill, ps, cat, ...), /tmp (1777) and /work.
#
# Idempotent and fast: does nothing when the image already exists, unless --force.
#
# Usage: scripts/build-test-image.sh [--force]
set -euo pipefail

IMAGE="${WHARF_TEST_IMAGE:-wharf-sandbox:test}"
FORCE=0
for arg in "$@"; do
  case "$arg" in
    --force) FORCE=1 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) echo "unknown argument: $arg" >&2; exit 2 ;;
  esac
done

if ! command -v docker >/dev/null 2>&1; then
  echo "build-test-image: docker CLI not found" >&2
  exit 1
fi

if [ "$FORCE" = 0 ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "build-test-image: $IMAGE already exists (use --force to rebuild)"
  exit 0
fi

# A static busybox: the binary must run in an image with no libc at all.
is_static() {
  [ -x "$1" ] || return 1
  if command -v file >/dev/null 2>&1; then
    file -L "$1" | grep -q 'statically linked' && return 0
    # `file` says "static-pie linked" for static PIE binaries.
    file -L "$1" | grep -q 'static-pie linked' && return 0
    return 1
  fi
  # No `file`: trust the package that ships static binaries.
  dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'install ok installed'
}

BUSYBOX=""
for candidate in /bin/busybox /usr/bin/busybox; do
  if is_static "$candidate"; then BUSYBOX="$candidate"; break; fi
done

if [ -z "$BUSYBOX" ]; then
  echo "build-test-image: installing busybox-static" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  if ! $SUDO apt-get install -y -q busybox-static >/dev/null; then
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q busybox-static >/dev/null
  fi
  for candidate in /bin/busybox /usr/bin/busybox; do
    if is_static "$candidate"; then BUSYBOX="$candidate"; break; fi
  done
fi

if [ -z "$BUSYBOX" ]; then
  echo "build-test-image: no static busybox found after installing busybox-static" >&2
  exit 1
fi

CONTEXT="$(mktemp -d)"
trap 'rm -rf "$CONTEXT"' EXIT

mkdir -p "$CONTEXT/rootfs/bin" "$CONTEXT/rootfs/tmp" "$CONTEXT/rootfs/work" \
  "$CONTEXT/rootfs/etc" "$CONTEXT/rootfs/root"
cp "$BUSYBOX" "$CONTEXT/rootfs/bin/busybox"
chmod 0755 "$CONTEXT/rootfs/bin/busybox"
chmod 1777 "$CONTEXT/rootfs/tmp"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
  > "$CONTEXT/rootfs/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$CONTEXT/rootfs/etc/group"

# Applet symlinks are made at build time by busybox itself, so the list always matches the
# binary. The legacy builder (no BuildKit needed) runs this RUN with the scratch image's
# empty environment, hence the absolute path.
cat > "$CONTEXT/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
RUN ["/bin/busybox", "--install", "-s", "/bin"]
ENV PATH=/bin
WORKDIR /work
CMD ["/bin/sh"]
DOCKERFILE

DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" "$CONTEXT" >/dev/null
echo "build-test-image: built $IMAGE"
