#!/usr/bin/env bash
# Registers gVisor's `runsc` (Debian's package) with the local Docker engine as the runtime
# `runsc`, for sandboxes at `isolation = "gvisor"`, and again as `runsc-no-host-uds`
# without host sockets (the agent is then reached through the engine: the tests run both):
# merges them into the `runtimes` of
# /etc/docker/daemon.json (everything else there — storage driver, MTU — is kept) and sends
# dockerd SIGHUP, which reloads runtimes without a restart. Idempotent.
#
# Runtime arguments, and why (docs/security.md, "Isolation levels"):
#   --platform=ptrace   works on VMs without nested virtualisation (no KVM);
#   --network=host      gVisor hands network syscalls to the host kernel inside the
#                       container's own network namespace; its own network stack refuses
#                       to start on these VMs ("cannot run with network enabled in root
#                       network namespace");
#   --host-uds=all      the sandbox agent's socket, in a host tmpfs volume, is created as a
#                       host socket (gVisor's files are otherwise its own kernel's). This
#                       runsc (Debian's 20221219) binds host sockets only with `all`:
#                       `create` refuses the bind (EPERM), `open` keeps it inside gVisor.
set -euo pipefail

if ! command -v runsc >/dev/null; then
  echo "register-gvisor: runsc is not installed (apt-get install runsc)" >&2
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  echo "register-gvisor: needs root (it edits /etc/docker/daemon.json)" >&2
  exit 1
fi
changed="$(python3 - "$(command -v runsc)" <<'PY'
import json, os, sys
path = "/etc/docker/daemon.json"
config = {}
if os.path.exists(path) and os.path.getsize(path) > 0:
    with open(path) as f:
        config = json.load(f)
want = {
    "runsc": {
        "path": sys.argv[1],
        "runtimeArgs": ["--platform=ptrace", "--network=host", "--host-uds=all"],
    },
    "runsc-no-host-uds": {
        "path": sys.argv[1],
        "runtimeArgs": ["--platform=ptrace", "--network=host"],
    },
}
runtimes = config.setdefault("runtimes", {})
if all(runtimes.get(name) == runtime for name, runtime in want.items()):
    print("no")
    sys.exit(0)
runtimes.update(want)
os.makedirs(os.path.dirname(path), exist_ok=True)
staged = path + ".wharf-staged"
with open(staged, "w") as f:
    json.dump(config, f, indent=2)
os.replace(staged, path)
print("yes")
PY
)"
if [ "$changed" = yes ]; then
  kill -HUP "$(pidof dockerd)"
fi
for _ in $(seq 1 50); do
  if docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc-no-host-uds"'; then
    echo "register-gvisor: the docker engine has runtimes runsc and runsc-no-host-uds"
    exit 0
  fi
  sleep 0.2
done
echo "register-gvisor: dockerd did not pick up runsc (is it running?)" >&2
exit 1
