#!/usr/bin/env python3
"""Checks the layering rules of ARCHITECTURE.md on the host's source, file by file:

- no import circle between files (a file may use its parent module's items: a child file
  holding `impl` blocks of its parent is one module split for size, not a circle);
- no file in `api/` (the protocol adapters) reaches `runtime`, `registry`, `sessions`,
  `sandbox_toolset`, `imports`, `engines`, `store`, `docker` or `oci`: adapters see the
  front door and the leaves;
- the front door re-exports none of those modules' items (`pub use`): what it hands an
  adapter is its own type or a leaf's, so the rule above cannot be walked around.

Usage: scripts/check-imports.py [host/src]. Exit 1 with the offenders listed.
"""
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "host", "src")
ADAPTER_MAY_NOT_USE = (
    "runtime", "registry", "sessions", "sandbox_toolset", "imports", "engines", "store", "docker", "oci",
)


def modules(root):
    found = {}
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(d, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, "::")
                found["" if name in ("lib", "main") else name] = path
    return found


def code_of(path):
    src = open(path, encoding="utf-8").read()
    src = re.sub(r"//[^\n]*", "", src)
    tests = src.find("#[cfg(test)]\nmod tests")
    return src if tests < 0 else src[:tests]


def resolve(files, current, path, inline_modules):
    parts = path.split("::")
    head, parts = parts[0], parts[1:]
    if head == "crate":
        base = []
    elif head in ("super", "self"):
        if inline_modules:
            # `super` inside an inline `mod x { … }` is not the file's parent.
            return None
        base = current.split("::") if current else []
        if head == "super":
            base = base[:-1]
        while parts and parts[0] == "super":
            base, parts = base[:-1], parts[1:]
    else:
        return None
    for k in range(len(parts), -1, -1):
        name = "::".join(base + parts[:k])
        if name in files:
            return name
    return None


def main():
    files = modules(ROOT)
    edges = {}
    problems = []
    for name, path in files.items():
        src = code_of(path)
        inline = re.search(r"\bmod\s+\w+\s*\{", src) is not None
        deps = set()
        for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", src):
            target = resolve(files, name, m.group(1), inline)
            if target in (None, "", name) or name.startswith(target + "::"):
                continue
            deps.add(target)
            if name.split("::")[0] == "api" and target.split("::")[0] in ADAPTER_MAY_NOT_USE:
                problems.append(f"{path}: the adapter `{name}` uses `{target}`")
        if name.split("::")[0] == "front_door":
            for m in re.finditer(r"\bpub\s+use\s+((?:crate|super)(?:::\w+)+)", src):
                target = resolve(files, name, m.group(1), inline)
                if target and target.split("::")[0] in ADAPTER_MAY_NOT_USE:
                    problems.append(f"{path}: the front door re-exports `{m.group(1)}` to its adapters")
        edges[name] = deps
    index, low, stack, on_stack, counter = {}, {}, [], set(), [0]
    sys.setrecursionlimit(10000)

    def connect(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                problems.append("import circle: " + " <-> ".join(sorted(component)))

    for v in list(edges):
        if v not in index:
            connect(v)
    for p in sorted(set(problems)):
        print(p)
    if problems:
        sys.exit(1)
    print(f"check-imports: {len(files)} files, no import circle, adapters above the front door, no side door")


main()
