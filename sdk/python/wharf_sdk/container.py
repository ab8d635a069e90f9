"""Containers on the host's engine (a backend sees only its own; images, networks and
mounts must be granted by the operator and declared in `requires`).

```python
from wharf_sdk import container
info = container.create("wharf-sandbox:test", command=["sleep", "600"], env={"A": "1"})
container.start(info.id)
container.copy_in(info.id, "/tmp/a.txt", b"hello")
container.remove(info.id)
```
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import _wit


@dataclasses.dataclass
class Mount:
    """A granted host path bind-mounted into the container."""

    host_path: str
    container_path: str
    read_only: bool = True


@dataclasses.dataclass
class ContainerInfo:
    """One of the caller's containers."""

    id: str
    name: str
    image: str
    state: str
    labels: Dict[str, str]
    created_at_ms: int


def _info(raw: object) -> ContainerInfo:
    return ContainerInfo(
        id=raw.id,  # type: ignore[attr-defined]
        name=raw.name,  # type: ignore[attr-defined]
        image=raw.image,  # type: ignore[attr-defined]
        state=raw.state.name.lower(),  # type: ignore[attr-defined]
        labels=dict(raw.labels),  # type: ignore[attr-defined]
        created_at_ms=raw.created_at_ms,  # type: ignore[attr-defined]
    )


def _pairs(values: Union[None, Dict[str, str], Sequence[Tuple[str, str]]]) -> List[Tuple[str, str]]:
    if not values:
        return []
    if isinstance(values, dict):
        return [(str(k), str(v)) for k, v in values.items()]
    return [(str(k), str(v)) for k, v in values]


def create(
    image: str,
    *,
    command: Optional[Sequence[str]] = None,
    env: Union[None, Dict[str, str], Sequence[Tuple[str, str]]] = None,
    workdir: Optional[str] = None,
    labels: Optional[Dict[str, str]] = None,
    mounts: Sequence[Mount] = (),
    network: str = "none",
    cpu_millis: Optional[int] = None,
    memory_bytes: Optional[int] = None,
    pids_limit: Optional[int] = None,
    read_only_root: bool = False,
) -> ContainerInfo:
    """Creates (does not start) a container. `network` is `"none"`, `"bridge"` or a
    granted network's name."""
    m = _wit.module("container")
    if network == "none":
        net = m.Network_None_()
    elif network == "bridge":
        net = m.Network_Bridge()
    else:
        net = m.Network_Named(network)
    spec = m.ContainerSpec(
        image=image,
        command=list(command) if command is not None else None,
        env=_pairs(env),
        workdir=workdir,
        labels=_pairs(labels),
        mounts=[m.Mount(x.host_path, x.container_path, x.read_only) for x in mounts],
        network=net,
        cpu_millis=cpu_millis,
        memory_bytes=memory_bytes,
        pids_limit=pids_limit,
        read_only_root=read_only_root,
    )
    return _info(_wit.host_call(m.create, spec))


def start(id: str) -> None:
    """Starts the container."""
    _wit.host_call(_wit.module("container").start, id)


def stop(id: str, timeout_ms: int = 10_000) -> None:
    """Stops the container, killing it after `timeout_ms`."""
    _wit.host_call(_wit.module("container").stop, id, timeout_ms)


def remove(id: str) -> None:
    """Removes the container (idempotent)."""
    _wit.host_call(_wit.module("container").remove, id)


def inspect(id: str) -> Optional[ContainerInfo]:
    """The container, or `None` when it does not exist or is not the caller's."""
    raw = _wit.host_call(_wit.module("container").inspect, id)
    return None if raw is None else _info(raw)


def list_owned(session_id: Optional[str] = None) -> List[ContainerInfo]:
    """The caller's containers (only those of `session_id` when given)."""
    return [_info(x) for x in _wit.host_call(_wit.module("container").list_owned, session_id)]


def copy_in(id: str, path: str, content: Union[bytes, str], mode: int = 0o644) -> None:
    """Writes `content` to `path` in the container."""
    _wit.host_call(_wit.module("container").copy_in, id, path, _wit.as_bytes(content), mode)


def copy_out(id: str, path: str, max_bytes: int = 4 << 20) -> bytes:
    """Reads at most `max_bytes` of the file at `path`."""
    return bytes(_wit.host_call(_wit.module("container").copy_out, id, path, max_bytes))
