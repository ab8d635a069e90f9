#!/usr/bin/env bash
# Builds the local image `wharf-mcp-servers:test`: the official MCP Python SDK and the test
# servers of tests/fixtures/mcp_servers/ under /srv, for the MCP bridge's stdio transport
# (tests/mcp_bridge_stdio.rs).
#
# No image can be pulled on the build machines, so it is built FROM scratch out of host
# files: Debian's python3.11 (the binary, the libraries `ldd` names for it and for its
# extension modules, its standard library) and the SDK's packages from the venv
# scripts/mcp-sdk-venv.sh makes (the same CPython 3.11 ABI), on PYTHONPATH. No shell, no
# package manager, no CMD: in a container Wharf creates, the sandbox agent then idles as
# PID 1 and the bridge starts the server beside it. Idempotent: rebuilt only when its
# inputs change (a digest label).
#
# Usage: scripts/build-mcp-server-image.sh [--force]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
IMAGE="${WHARF_MCP_IMAGE:-wharf-mcp-servers:test}"
force=0
[ "${1:-}" = "--force" ] && force=1

python=/usr/bin/python3.11
if [ ! -x "$python" ]; then
  echo "build-mcp-server-image: installing python3.11-minimal" >&2
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  $SUDO apt-get install -y -q python3.11-minimal >/dev/null \
    || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q python3.11-minimal >/dev/null; }
fi
venv="$("$root/scripts/mcp-sdk-venv.sh")"
site="$(ls -d "$venv"/lib/python3.11/site-packages)"

digest="$( { cat "$root"/tests/fixtures/mcp_servers/*.py; cat "$venv/.wharf-pin"; sha256sum "$0"; } | sha256sum | cut -c1-16)"
if [ "$force" = 0 ] && [ "$(docker image inspect --format '{{index .Config.Labels "wharf.mcp-image"}}' "$IMAGE" 2>/dev/null)" = "$digest" ]; then
  echo "build-mcp-server-image: $IMAGE is up to date" >&2
  exit 0
fi

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
rootfs="$ctx/rootfs"
mkdir -p "$rootfs/usr/bin" "$rootfs/usr/lib" "$rootfs/opt" "$rootfs/srv" "$rootfs/tmp" "$rootfs/etc"
chmod 1777 "$rootfs/tmp"
cp "$python" "$rootfs/usr/bin/python3"
# The standard library, without its tests and the GUI and installer parts.
tar -C /usr/lib --exclude='python3.11/test' --exclude='python3.11/idlelib' \
  --exclude='python3.11/tkinter' --exclude='python3.11/ensurepip' --exclude='__pycache__' \
  -cf - python3.11 | tar -C "$rootfs/usr/lib" -xf -
tar -C "$site/.." --exclude='__pycache__' --exclude='pip' --exclude='pip-*' \
  -cf - site-packages | tar -C "$rootfs/opt" -xf -
mv "$rootfs/opt/site-packages" "$rootfs/opt/mcp"
cp "$root"/tests/fixtures/mcp_servers/*.py "$rootfs/srv/"
# Every shared library the interpreter and the extension modules need, at its own path.
{
  ldd "$python"
  find "$rootfs/usr/lib/python3.11/lib-dynload" "$rootfs/opt/mcp" -name '*.so*' -exec ldd {} \; 2>/dev/null
} | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/lib/ {print $1}' | sort -u | while read -r lib; do
  cp -L --parents "$lib" "$rootfs/"
done
printf 'root:x:0:0:root:/root:/bin/false\nsandbox:x:1000:1000:sandbox:/tmp:/bin/false\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nsandbox:x:1000:\n' > "$rootfs/etc/group"

cat > "$ctx/Dockerfile" <<DOCKERFILE
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/bin PYTHONPATH=/opt/mcp PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
WORKDIR /tmp
LABEL wharf.mcp-image=$digest
DOCKERFILE
DOCKER_BUILDKIT=0 docker build -q -t "$IMAGE" "$ctx" >/dev/null
echo "build-mcp-server-image: built $IMAGE" >&2
