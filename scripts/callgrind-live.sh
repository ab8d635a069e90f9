#!/usr/bin/env bash
# Instructions per REST tool call (`echo:say`, one kept-alive connection) of one `wharf
# serve` process under callgrind, with the console's live view watching
# (`/console/calls/stream`, read as it comes by a signed-in console session) and without.
# Every instruction of the process counts, the events' encoding and writing included.
# After 300 warm-up calls, 2,000 calls per measurement, the two cases taking turns twice.
# Prints one line per case and the with/without ratio (issue 39: at most 1.05).
#
# Usage: scripts/callgrind-live.sh [WHARF_BIN]. Needs valgrind; about three minutes.
set -euo pipefail
bin="$(realpath "${1:-target/debug/wharf}")"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${WHARF_KEEP_CALLGRIND:-}" ] && cp -r "$work" "$WHARF_KEEP_CALLGRIND"; rm -rf "$work"' EXIT
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
cat > "$work/wharf.toml" <<'EOF'
[[auth.tokens]]
name = "ops"
value = "t-callgrind-admin-5e1f"
scopes = ["admin"]

[backends.echo]
path = "bundled:echo"
EOF
valgrind --tool=callgrind --callgrind-out-file="$work/live.%p" \
  "$bin" serve --config "$work/wharf.toml" --listen "127.0.0.1:$port" \
  --data-dir "$work/data" > "$work/wharf.log" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.5
done

python3 - "$work" "$pid" "$port" <<'EOF'
import glob, http.client, json, os, re, socket, subprocess, sys, threading, time, urllib.parse
work, pid, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
TOKEN = "t-callgrind-admin-5e1f"
AUTH = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
REST = json.dumps({"tool": "echo:say", "args": {"text": "hi"}})

def console_cookie():
    c = http.client.HTTPConnection("127.0.0.1", port)
    c.request("GET", "/console/login")
    r = c.getresponse(); page = r.read().decode()
    nonce_cookie = r.getheader("set-cookie").split(";")[0]
    nonce = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    form = urllib.parse.urlencode({"token": TOKEN, "csrf": nonce})
    c.request("POST", "/console/login", form, {
        "Content-Type": "application/x-www-form-urlencoded", "Cookie": nonce_cookie,
        "Origin": f"http://127.0.0.1:{port}"})
    r = c.getresponse(); r.read()
    assert r.status == 303, r.status
    for value in r.msg.get_all("set-cookie"):
        if value.startswith("wharf_console="):
            return value.split(";")[0]
    raise SystemExit("no console cookie")

class Watcher:
    """An open live view, reading every event as it comes."""
    def __init__(self, cookie):
        self.conn = http.client.HTTPConnection("127.0.0.1", port)
        self.conn.request("GET", "/console/calls/stream", headers={"Cookie": cookie, "Accept": "text/event-stream"})
        self.sock = self.conn.sock
        self.response = self.conn.getresponse()
        assert self.response.status == 200, self.response.status
        self.events = 0
        threading.Thread(target=self.read, daemon=True).start()
    def read(self):
        try:
            for line in self.response:
                if line.startswith(b"data: "):
                    self.events += len(json.loads(line[6:])["calls"])
        except Exception:
            pass
    def close(self):
        # Shut down, not only closed: the reading thread holds the socket open otherwise,
        # and the host would keep writing to a watcher that is gone.
        self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()

rest = http.client.HTTPConnection("127.0.0.1", port)
def calls(n):
    for _ in range(n):
        rest.request("POST", "/v1/call", REST, AUTH)
        r = rest.getresponse(); body = r.read()
        assert r.status == 200 and b'"code":0' in body, body

def total():
    subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
    newest = max(glob.glob(os.path.join(work, "live.*")), key=os.path.getmtime)
    for line in open(newest):
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit("no totals in " + newest)

cookie = console_cookie()
calls(300)
results = {"without": [], "with": []}
seen = 0
for _ in range(2):
    for case in ("without", "with"):
        watcher = Watcher(cookie) if case == "with" else None
        if watcher:
            calls(20)  # the stream is open and its first events are through
        subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
        calls(2000)
        results[case].append(total() / 2000)
        if watcher:
            time.sleep(0.5)  # the last window's event is through
            seen += watcher.events
            watcher.close()
            time.sleep(0.5)  # the host has seen the watcher go
for case, per_call in results.items():
    print(f"{case} a watcher: " + ", ".join(f"{x / 1000:.1f}k" for x in per_call) + " instructions per call")
print(f"events the watcher read: {seen} of {2 * 2020} calls")
print(f"with/without: {sum(results['with']) / sum(results['without']):.3f}")
EOF
kill "$pid"
