#!/usr/bin/env bash
# Builds the local image `wharf-sandbox:test` used by the Docker integration tests.
#
# No image can be pulled on the build machines, so the image is built FROM scratch with a
# static busybox from Debian's `busybox-static` package: /bin/busybox plus its applet
# symlinks (sh, setsid, kill, ps, cat, ...), /tmp (1777) and /work; a user `sandbox` (1000)
# and `/bin/suid-euid`, a program that prints its effective uid.
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

# Bumped whenever the image's contents change, so an older local image is rebuilt.
IMAGE_VERSION=2
if [ "$FORCE" = 0 ] && [ "$(docker image inspect --format '{{index .Config.Labels "wharf.test-image"}}' "$IMAGE" 2>/dev/null)" = "$IMAGE_VERSION" ]; then
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
printf 'root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/work:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' \
  > "$CONTEXT/rootfs/etc/passwd"
printf 'root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n' > "$CONTEXT/rootfs/etc/group"

# A probe for the hardening tests: it prints its effective uid. Made set-user-id root on a
# volume (the image's own layers are mounted `nosuid` here), a non-root user running it
# sees 0 unless `no-new-privileges` holds.
cat > "$CONTEXT/euid.c" <<'C'
#include <stdio.h>
#include <unistd.h>
int main(void) { printf("%u\n", (unsigned) geteuid()); return 0; }
C
cc -static -O2 -o "$CONTEXT/rootfs/bin/suid-euid" "$CONTEXT/euid.c"

# Applet symlinks are made at build time by busybox itself, so the list always matches the
# binary. The legacy builder (no BuildKit needed) runs this RUN with the scratch image's
# empty environment, hence the absolute path.
cat > "$CONTEXT/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY rootfs/ /
RUN ["/bin/busybox", "--install", "-s", "/bin"]
ENV PATH=/bin
WORKDIR /work
LABEL wharf.test-image=IMAGE_VERSION
CMD ["/bin/sh"]
DOCKERFILE

sed -i "s/IMAGE_VERSION/$IMAGE_VERSION/" "$CONTEXT/Dockerfile"
DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" "$CONTEXT" >/dev/null
echo "build-test-image: built $IMAGE"
