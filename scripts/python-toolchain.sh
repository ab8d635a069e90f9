#!/usr/bin/env bash
# Installs the Python toolchain for building Python backends: a venv (default
# target/python-venv, override with WHARF_PY_VENV) with componentize-py pinned to the
# release the SDK is tested with, and the SDK from sdk/python (editable, so SDK edits
# apply to the next build). Prints the venv's path. Idempotent and quick when done.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${WHARF_PY_VENV:-$root/target/python-venv}"
pin="$(sed -n 's/^COMPONENTIZE_PY_VERSION = "\(.*\)"$/\1/p' "$root/sdk/python/wharf_sdk/contract.py")"
[ -n "$pin" ] || { echo "python-toolchain: no COMPONENTIZE_PY_VERSION in contract.py" >&2; exit 1; }

python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null || ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv python3-pip >/dev/null
    python=python3
  else
    echo "python-toolchain: please install python3 (>= 3.10) with venv" >&2
    exit 1
  fi
fi

stamp="$venv/.wharf-toolchain"
want="componentize-py==$pin $(cat "$root/sdk/python/pyproject.toml" | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/componentize-py" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  mkdir -p "$(dirname "$venv")"
  # A lock so parallel test processes do not install into the same venv at once.
  exec 9>"$venv.lock"
  flock 9
  if [ ! -x "$venv/bin/componentize-py" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv" >&2
    "$venv/bin/pip" install --disable-pip-version-check -q "componentize-py==$pin" >&2
    "$venv/bin/pip" install --disable-pip-version-check -q --no-deps -e "$root/sdk/python" >&2
    echo "$want" > "$stamp"
  fi
fi
echo "$venv"
