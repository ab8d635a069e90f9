#!/usr/bin/env bash
# A venv (default target/mcp-venv, override with WHARF_MCP_VENV) with the official MCP
# Python SDK pinned to the release the tests and the benchmark speak to Wharf with, and the
# authorization server of the OAuth tests (Authlib on Flask; joserfc, Authlib's JOSE, signs
# scripts/callgrind-auth.sh's token). Prints the venv's path. Idempotent and quick when done.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${WHARF_MCP_VENV:-$root/target/mcp-venv}"
pin="mcp==2.3.0 authlib==1.9.10 flask==3.1.3"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.wharf-pin" 2>/dev/null)" != "$pin" ]; then
  mkdir -p "$(dirname "$venv")"
  exec 9>"$venv.lock"
  flock 9
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.wharf-pin" 2>/dev/null)" != "$pin" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    # shellcheck disable=SC2086 # the pin is a list of requirements
    "$venv/bin/pip" install -q --disable-pip-version-check $pin >&2
    echo "$pin" > "$venv/.wharf-pin"
  fi
fi
echo "$venv"
