#!/usr/bin/env bash
# Instructions per REST call with a static token and with an OAuth access token (RFC 9068
# JWT), counted by callgrind in one `wharf serve` process (instructions do not move with
# the machine's load). The keys are served by a static file server from
# tests/fixtures/oauth; the JWT is signed with the same fixture key by joserfc from the MCP
# SDK venv. After 300 warm-up calls of each kind, 2,000 `echo:say` calls on one kept-alive
# connection per measurement, static and JWT alternating twice. Prints one line per
# measurement and the ratio. Needs valgrind; takes about two minutes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo build -q -p wharf --bin wharf
venv="${WHARF_MCP_VENV_READY:-$(scripts/mcp-sdk-venv.sh)}"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
as_port="$(free_port)"
port="$(free_port)"
mkdir -p "$work/as/.well-known"
issuer="http://127.0.0.1:$as_port"
printf '{"issuer":"%s","jwks_uri":"%s/jwks"}' "$issuer" "$issuer" \
  > "$work/as/.well-known/oauth-authorization-server"
printf '{"keys":[%s]}' "$(cat tests/fixtures/oauth/rsa-a.jwk.json)" > "$work/as/jwks"
(cd "$work/as" && exec python3 -m http.server "$as_port" --bind 127.0.0.1 >/dev/null 2>&1) &
cat > "$work/wharf.toml" <<EOF
[backends.echo]
path = "bundled:echo"
[[auth.tokens]]
name = "static"
value = "static-secret"
scopes = ["read", "call"]
[auth.oauth]
resource = "http://127.0.0.1:$port"
authorization_servers = ["$issuer"]
EOF
jwt="$("$venv/bin/python" - "$issuer" "http://127.0.0.1:$port" <<'EOF'
import sys, time
from joserfc import jwt
from joserfc.jwk import RSAKey
key = RSAKey.import_key(open("tests/fixtures/oauth/rsa-a.pem").read())
now = int(time.time())
claims = {"iss": sys.argv[1], "aud": sys.argv[2], "sub": "alice", "client_id": "bench",
          "scope": "wharf:read wharf:call", "iat": now, "exp": now + 3600, "jti": "bench"}
print(jwt.encode({"alg": "RS256", "kid": "rsa-a", "typ": "at+jwt"}, claims, key))
EOF
)"
valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p" \
  target/debug/wharf serve --config "$work/wharf.toml" --listen "127.0.0.1:$port" \
  --data-dir "$work/data" > "$work/wharf.log" 2>&1 &
wharf_pid=$!
for _ in $(seq 1 600); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  sleep 0.5
done
python3 - "$port" "$wharf_pid" "$jwt" "$work" <<'EOF'
import http.client, json, re, subprocess, sys, glob, os
port, pid, jwt, work = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
body = json.dumps({"tool": "echo:say", "args": {"text": "hi"}})
conn = http.client.HTTPConnection("127.0.0.1", port)
def calls(token, n):
    for _ in range(n):
        conn.request("POST", "/v1/call", body, {"Authorization": f"Bearer {token}",
                                                 "Content-Type": "application/json"})
        r = conn.getresponse()
        r.read()
        assert r.status == 200, r.status
def total():
    subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
    newest = max(glob.glob(os.path.join(work, "cg.*")), key=os.path.getmtime)
    for line in open(newest):
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit("no totals in " + newest)
calls("static-secret", 300)
calls(jwt, 300)
results = {"static": [], "jwt": []}
for _ in range(2):
    for kind, token in (("static", "static-secret"), ("jwt", jwt)):
        subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
        calls(token, 2000)
        results[kind].append(total() / 2000)
for kind, per_call in results.items():
    print(f"{kind}: " + ", ".join(f"{x / 1000:.1f}k" for x in per_call) + " instructions per call")
ratio = sum(results["jwt"]) / sum(results["static"])
print(f"jwt/static: {ratio:.3f}")
EOF
kill "$wharf_pid"
