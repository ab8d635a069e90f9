#!/usr/bin/env bash
# Fuzzes a real `wharf serve` (the debug binary the tests built) against its own
# /openapi.json with schemathesis, every check on (`--checks all`): once with tokens
# configured (an admin token, so the admin routes exist and are described) and once with
# none (the open loopback host). The bundled resource backends (echo, text-index,
# scratchpad) are loaded: no sandbox provider, so no request makes a container.
# Deterministic (fixed seed, bounded examples per operation). Exits non-zero on any
# finding; the reports are left in target/schemathesis/.
#
# Where a check cannot apply to this API, scripts/schemathesis.toml narrows it to the
# operations concerned and says why.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
bin="${WHARF_BIN:-$root/target/debug/wharf}"
venv="${WHARF_SCHEMATHESIS_VENV:-$root/target/schemathesis-venv}"
version="4.32.5"
examples="${WHARF_SCHEMATHESIS_EXAMPLES:-100}"
seed="${WHARF_SCHEMATHESIS_SEED:-7420}"
out="$root/target/schemathesis"
started=$SECONDS

if [ -z "${WHARF_BIN:-}" ]; then
  # A no-op after `cargo test --workspace` (CI); the workspace's features, as the tests build.
  cargo build -q --workspace --bins
fi
[ -x "$bin" ] || { echo "schemathesis.sh: $bin is not built" >&2; exit 1; }
if [ "$("$venv/bin/schemathesis" --version 2>/dev/null)" != "schemathesis, version $version" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "schemathesis==$version"
fi

work="$(mktemp -d)"
host_pid=""
left_behind=""
stop_host() {
  if [ -n "$host_pid" ] && kill -0 "$host_pid" 2>/dev/null; then
    kill -TERM "$host_pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$host_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$host_pid" 2>/dev/null || true
    wait "$host_pid" 2>/dev/null || true
  fi
  host_pid=""
}
cleanup() {
  stop_host
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# run NAME TOKEN: serves the bundled backends (with an admin token TOKEN, or open when
# TOKEN is empty), fuzzes it, stops it. Returns schemathesis's status.
run() {
  local name="$1" token="$2" port dir status=0
  port="$(free_port)"
  dir="$work/$name"
  mkdir -p "$dir" "$out"
  {
    echo "[server]"
    echo "listen = \"127.0.0.1:$port\""
    echo "data_dir = \"$dir/data\""
    for backend in echo text-index scratchpad; do
      echo "[backends.$backend]"
      echo "path = \"bundled:$backend\""
    done
    if [ -n "$token" ]; then
      echo "[[auth.tokens]]"
      echo "name = \"fuzzer\""
      echo "value = \"$token\""
      echo "scopes = [\"admin\"]"
    fi
  } >"$dir/wharf.toml"
  RUST_LOG="${RUST_LOG:-warn}" "$bin" serve --config "$dir/wharf.toml" >"$out/$name-host.log" 2>&1 &
  host_pid=$!
  local ready=0
  for _ in $(seq 1 600); do
    if curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1; then ready=1; break; fi
    kill -0 "$host_pid" 2>/dev/null || break
    sleep 0.1
  done
  if [ "$ready" != 1 ]; then
    echo "schemathesis.sh: the host ($name) did not become ready; its log:" >&2
    cat "$out/$name-host.log" >&2
    stop_host
    return 1
  fi
  cp "$root/scripts/schemathesis.toml" "$dir/schemathesis.toml"
  if [ -n "$token" ]; then
    printf '\n[auth.openapi.bearer]\nbearer = "%s"\n' "$token" >>"$dir/schemathesis.toml"
  fi
  # One worker: with two, hypothesis parses lambdas' source with `ast` from two threads,
  # and CPython 3.11's ast recursion counter is not thread-safe ("AST constructor recursion
  # depth mismatch", a runtime error that failed CI's run of stop 58 on the watch route).
  # The admin routes change the backend table, so they run apart, after the others: a
  # refused upload is remembered under its name (5011 from then on), which would make the
  # other operations' answers depend on what the admin draws happened to be.
  local part filter
  for part in api admin; do
    filter="--exclude-path-regex"
    [ "$part" = admin ] && filter="--include-path-regex"
    if [ "$part" = admin ] && [ -z "$token" ]; then continue; fi
    echo "schemathesis: $name, $part routes (127.0.0.1:$port)"
    "$venv/bin/schemathesis" --no-color --config-file "$dir/schemathesis.toml" run \
      "http://127.0.0.1:$port/openapi.json" "$filter" '^/v1/admin/' \
      --checks all --max-examples "$examples" --seed "$seed" --generation-deterministic \
      --workers 1 --max-failures 200 \
      --report junit --report-junit-path "$out/$name-$part.xml" || status=$?
  done
  stop_host
  # What this run's host made is labelled with its node id (so other hosts on the same
  # engine, a test suite running beside, are not counted).
  if [ -f "$dir/data/node-id" ] && command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    local left
    left="$(docker ps -aq --filter "label=wharf.node=$(cat "$dir/data/node-id")")"
    if [ -n "$left" ]; then
      left_behind="$left_behind $left"
      echo "$left" | xargs docker rm -f >/dev/null
    fi
    # Named volumes are what the fuzzer asked for (`POST /v1/volumes`), not leftovers: they
    # outlive the host by design, so the run removes its own.
    local volumes
    volumes="$(docker volume ls -q --filter "label=wharf.node=$(cat "$dir/data/node-id")")"
    if [ -n "$volumes" ]; then
      echo "$volumes" | xargs docker volume rm -f >/dev/null || true
    fi
  fi
  return "$status"
}

failed=0
run with-token "wharf-fuzz-$RANDOM$RANDOM" || failed=1
run without-token "" || failed=1

if [ -n "$left_behind" ]; then
  echo "schemathesis.sh: the runs left containers behind:$left_behind" >&2
  failed=1
fi
echo "schemathesis: done in $((SECONDS - started)) s"
exit "$failed"
