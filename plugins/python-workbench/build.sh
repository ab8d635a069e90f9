#!/usr/bin/env bash
# Builds the Python example into OUT (default target/python-plugins/workbench.wasm) with
# the pinned toolchain. Skips the build when the module, the SDK, the WIT and the pinned
# componentize-py are unchanged since the last one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/python-plugins/workbench.wasm}"
venv="$("$root/scripts/python-toolchain.sh")"
inputs="$( (cd "$root" && find plugins/python-workbench/app.py sdk/python/wharf_sdk/ wit/ -name '*.py' -o -name '*.wit' | LC_ALL=C sort | xargs sha256sum; cat "$venv/.wharf-toolchain") | sha256sum | cut -c1-64)"
stamp="$out.inputs"
if [ -f "$out" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$inputs" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$(dirname "$out")"
exec 9>"$out.lock"
flock 9
if [ ! -f "$out" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$inputs" ]; then
  "$venv/bin/wharf-py" build "$here/app.py" -o "$out" -q >&2
  echo "$inputs" > "$stamp"
fi
echo "$out"
