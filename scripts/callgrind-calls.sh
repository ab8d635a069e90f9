#!/usr/bin/env bash
# Instructions per tool call of two `wharf` binaries (before and after a change), counted by
# callgrind in one `wharf serve` process each (instructions do not move with the machine's
# load): REST `POST /v1/call` and MCP `tools/call` (one MCP session, 2025-06-18) of
# `echo:say`, each on one kept-alive connection. After 300 warm-up calls of each kind,
# 2,000 calls per measurement, the two binaries taking turns twice. Prints one line per
# binary and kind, and the after/before ratios.
#
# Usage: scripts/callgrind-calls.sh BEFORE_BIN AFTER_BIN. Needs valgrind; about four minutes.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 BEFORE_BIN AFTER_BIN" >&2; exit 2; }
before="$(realpath "$1")"
after="$(realpath "$2")"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cat > "$work/wharf.toml" <<'EOF'
[backends.echo]
path = "bundled:echo"
EOF

# Starts BIN under callgrind; prints "PID PORT".
start() {
  local bin="$1" name="$2" port
  port="$(free_port)"
  valgrind --tool=callgrind --callgrind-out-file="$work/$name.%p" \
    "$bin" serve --config "$work/wharf.toml" --listen "127.0.0.1:$port" \
    --data-dir "$work/data-$name" > "$work/$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 600); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.5
  done
  echo "$pid $port"
}
read -r before_pid before_port < <(start "$before" before)
read -r after_pid after_port < <(start "$after" after)

python3 - "$work" "$before_pid" "$before_port" "$after_pid" "$after_port" <<'EOF'
import glob, http.client, json, os, subprocess, sys
work = sys.argv[1]
hosts = {"before": (sys.argv[2], int(sys.argv[3])), "after": (sys.argv[4], int(sys.argv[5]))}
REST = json.dumps({"tool": "echo:say", "args": {"text": "hi"}})
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

class Client:
    def __init__(self, port):
        self.rest = http.client.HTTPConnection("127.0.0.1", port)
        self.mcp = http.client.HTTPConnection("127.0.0.1", port)
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "callgrind", "version": "1"}}}
        self.mcp.request("POST", "/mcp", json.dumps(init), MCP_HEADERS)
        r = self.mcp.getresponse(); r.read()
        assert r.status == 200, r.status
        self.session = {**MCP_HEADERS, "Mcp-Session-Id": r.getheader("mcp-session-id"),
                        "MCP-Protocol-Version": "2025-06-18"}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self.mcp.request("POST", "/mcp", json.dumps(note), self.session)
        r = self.mcp.getresponse(); r.read()
        self.id = 0

    def calls(self, kind, n):
        for _ in range(n):
            if kind == "rest":
                self.rest.request("POST", "/v1/call", REST, {"Content-Type": "application/json"})
                r = self.rest.getresponse(); body = r.read()
                assert r.status == 200 and b'"code":0' in body, body
            else:
                self.id += 1
                call = {"jsonrpc": "2.0", "id": self.id, "method": "tools/call",
                        "params": {"name": "echo:say", "arguments": {"text": "hi"}}}
                self.mcp.request("POST", "/mcp", json.dumps(call), self.session)
                r = self.mcp.getresponse(); body = r.read()
                assert r.status == 200 and b'"isError":false' in body, body

def total(name, pid):
    subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
    newest = max(glob.glob(os.path.join(work, f"{name}.*")), key=os.path.getmtime)
    for line in open(newest):
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit("no totals in " + newest)

clients = {name: Client(port) for name, (_, port) in hosts.items()}
for client in clients.values():
    client.calls("rest", 300)
    client.calls("mcp", 300)
results = {(name, kind): [] for name in hosts for kind in ("rest", "mcp")}
for _ in range(2):
    for name, (pid, _) in hosts.items():
        for kind in ("rest", "mcp"):
            subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
            clients[name].calls(kind, 2000)
            results[(name, kind)].append(total(name, pid) / 2000)
for (name, kind), per_call in results.items():
    print(f"{name} {kind}: " + ", ".join(f"{x / 1000:.1f}k" for x in per_call) + " instructions per call")
for kind in ("rest", "mcp"):
    ratio = sum(results[("after", kind)]) / sum(results[("before", kind)])
    print(f"{kind} after/before: {ratio:.3f}")
EOF
kill "$before_pid" "$after_pid"
