"""`workbench`: a sandbox-server-style backend written in Python.

What it shows:
- a shared resource built once per instance in `warmup` (a search index over the
  operator's documents, or built-in ones);
- session tools with per-session data (notes kept in the session, across calls and restarts);
- backend- and session-scoped `kv` (a counter shared by every instance, a draft per session);
- typed arguments (`Literal`, `Optional`, lists, a dataclass) whose JSON Schema the host
  enforces before the code runs;
- `ToolError` with a code, an uncaught exception that still reaches the caller as 5000 with
  its message, and an attachment;
- outbound HTTP with a secret the operator granted by name as its bearer token;
- a container of its own, its files and a background process through the sandbox agent
  (`files`, `process`: contract 0.3.0).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections import Counter
from typing import Dict, List, Literal, Optional

from wharf_sdk import (
    Attachment,
    Backend,
    Capabilities,
    Output,
    Session,
    ToolError,
    container,
    files,
    http,
    kv,
    log,
    process,
    secrets,
    tool,
)

BUILT_IN = {
    "wasmtime": "Wasmtime is a fast and secure runtime for WebAssembly components and modules",
    "python": "componentize-py builds WebAssembly components from Python applications",
    "wharf": "Wharf loads backends shipped as WebAssembly components and serves their tools to agents",
    "sessions": "A session keeps per-conversation state on the host across calls and restarts",
}

Priority = Literal["low", "normal", "high"]


@dataclasses.dataclass
class Filter:
    """Which notes to return."""

    tag: Optional[str] = None
    """Only notes with this tag."""
    priority: Optional[Priority] = None
    """Only notes of this priority."""


def _terms(text: str) -> List[str]:
    return [t.lower() for t in re.split(r"\W+", text) if t]


class Index:
    """An inverted index: term → {document id: term frequency}."""

    def __init__(self, documents: Dict[str, str]) -> None:
        self.documents = documents
        self.postings: Dict[str, Dict[str, int]] = {}
        for doc_id, text in documents.items():
            for term, count in Counter(_terms(text)).items():
                self.postings.setdefault(term, {})[doc_id] = count

    def search(self, query: str, limit: int) -> List[dict]:
        n = len(self.documents)
        scores: Dict[str, float] = {}
        for term in _terms(query):
            hits = self.postings.get(term, {})
            idf = math.log(1 + n / len(hits)) if hits else 0.0
            for doc_id, tf in hits.items():
                scores[doc_id] = scores.get(doc_id, 0.0) + tf * idf
        ranked = sorted(scores.items(), key=lambda kv_: (-kv_[1], kv_[0]))[:limit]
        return [{"id": d, "text": self.documents[d], "score": round(s, 4)} for d, s in ranked]


class Workbench(Backend):
    """Notes, search and counters: a Python port of a sandbox-server backend."""

    name = "workbench"
    version = "0.1.0"
    description = "Notes per session, a search index built at warmup, and kv counters (Python)."
    requires = Capabilities(images=["wharf-sandbox:test"])
    config_schema = {
        "type": "object",
        "properties": {"documents": {"type": "object", "additionalProperties": {"type": "string"}}},
    }

    def __init__(self) -> None:
        self.index: Optional[Index] = None

    def warmup(self, config: Optional[dict]) -> None:
        documents = dict(BUILT_IN)
        if config:
            extra = config.get("documents", {})
            if not isinstance(extra, dict):
                raise ValueError("config.documents must map ids to texts")
            for doc_id, text in extra.items():
                if not str(text).strip():
                    # Refuses the load: the host shows this message as the reason.
                    raise ValueError(f"document {doc_id!r} is empty")
                documents[str(doc_id)] = str(text)
        self.index = Index(documents)
        log.info("workbench: indexed %d documents", len(documents))

    def initialize(self, session_id: str, key: str, config: Optional[dict]) -> dict:
        return {"notes": [], "owner": key}

    @tool("search", read_only=True)
    def search(self, query: str, limit: int = 5) -> list:
        """Searches the documents indexed at warmup.

        Args:
            query: Words to look for.
            limit: How many hits to return (1-50).
        """
        if not 1 <= limit <= 50:
            raise ToolError.invalid_input("limit must be between 1 and 50")
        assert self.index is not None, "warmup builds the index"
        hits = self.index.search(query, limit)
        if not hits:
            raise ToolError.no_results(f"nothing matches {query!r}")
        return hits

    @tool("add_note", session="required")
    def add_note(
        self,
        text: str,
        session: Session,
        tags: Optional[List[str]] = None,
        priority: Priority = "normal",
    ) -> dict:
        """Adds a note to this session.

        Args:
            text: What to remember.
            tags: Labels to find it again.
            priority: How much it matters.
        """
        if not text.strip():
            raise ToolError.invalid_input("text must not be blank")
        note = {"id": len(session.data["notes"]) + 1, "text": text, "tags": tags or [], "priority": priority}
        session.data["notes"].append(note)
        return {"added": note, "count": len(session.data["notes"])}

    @tool("list_notes", session="required", read_only=True)
    def list_notes(self, session: Session, filter: Optional[Filter] = None) -> dict:
        """Lists this session's notes.

        Args:
            filter: Only the notes that match.
        """
        notes = session.data["notes"]
        if filter is not None:
            if filter.tag is not None:
                notes = [n for n in notes if filter.tag in n["tags"]]
            if filter.priority is not None:
                notes = [n for n in notes if n["priority"] == filter.priority]
        return {"notes": notes, "owner": session.data.get("owner")}

    @tool("export_notes", session="required", read_only=True)
    def export_notes(self, session: Session) -> Output:
        """Returns this session's notes as a Markdown attachment."""
        lines = [f"- [{n['priority']}] {n['text']}" for n in session.data["notes"]]
        body = ("\n".join(lines) + "\n").encode("utf-8")
        return Output({"lines": len(lines)}, [Attachment("notes.md", "text/markdown", body)])

    @tool("bump", idempotent=False)
    def bump(self, counter: str, by: int = 1) -> dict:
        """Adds to a counter shared by every instance and session (backend-scoped kv).

        Args:
            counter: The counter's name.
            by: How much to add.
        """
        value = kv.backend.increment(f"counter/{counter}", by)
        return {"counter": counter, "value": value, "known": kv.backend.list_keys("counter/")}

    @tool("claim", idempotent=False)
    def claim(self, name: str, owner: str, expected: Optional[str] = None) -> dict:
        """Sets `name`'s owner to `owner` only if it is still `expected` (omitted: only if
        nobody owns it yet): a compare-and-swap in backend-scoped kv.

        Args:
            name: What is claimed.
            owner: Who claims it.
            expected: The owner it must still have.
        """
        key = f"owner/{name}"
        swapped = kv.backend.compare_and_swap(key, expected, owner)
        return {"claimed": swapped, "owner": kv.backend.get_str(key)}

    @tool("fetch", read_only=True, open_world=True)
    def fetch(self, url: str, bearer_secret: Optional[str] = None) -> dict:
        """GETs `url` (outbound HTTP within the operator's grants) and answers its status and
        body. The module imports nothing of `wasi:http` itself: the SDK's build keeps it.

        Args:
            url: An http(s) URL.
            bearer_secret: The name of a secret the operator granted this backend, sent as
                `Authorization: Bearer <value>` (the value never appears in the answer).
        """
        headers = {}
        if bearer_secret is not None:
            headers["authorization"] = f"Bearer {secrets.get(bearer_secret)}"
        response = http.get(url, headers=headers, timeout_ms=5000)
        return {"status": response.status, "body": response.text}

    @tool("draft", session="required")
    def draft(self, session: Session, text: Optional[str] = None) -> dict:
        """Keeps one draft per session in session-scoped kv: with `text` replaces it,
        without returns it.

        Args:
            text: The new draft; omit to read it.
        """
        if text is not None:
            kv.session.set("draft", text)
        return {"draft": kv.session.get_str("draft")}

    @tool("sandbox_files", idempotent=False, open_world=True)
    def sandbox_files(self, image: str) -> dict:
        """Creates a container of `image`, then through its sandbox agent writes, appends,
        reads, stats and lists a file, runs a background process that reads its stdin and
        reads its output to the end, and kills another; the container is removed after.

        Args:
            image: A granted image.
        """
        info = container.create(image, command=["sleep", "600"])
        try:
            container.start(info.id)
            files.write(info.id, "/tmp/d/a.txt", "one\n")
            files.write(info.id, "/tmp/d/a.txt", "two\n", append=True)
            data = files.read(info.id, "/tmp/d/a.txt")
            head = files.read(info.id, "/tmp/d/a.txt", offset=4, max_bytes=3)
            st = files.stat(info.id, "/tmp/d/a.txt")
            entries = [[e.name, e.kind] for e in files.list(info.id, "/tmp/d")]
            started = process.start(info.id, "echo out; read line; echo got $line")
            process.write_stdin(info.id, started.pid, "hi\n", close=True)
            text, offset = "", 0
            for _ in range(30):
                out = process.output(info.id, started.pid, offset=offset, wait_ms=2000)
                text += out.text
                offset = out.offset + len(out.data)
                if out.finished:
                    break
            sleeper = process.start(info.id, ["sleep", "30"])
            process.signal(info.id, sleeper.pid, "kill")
            for _ in range(30):
                ended = process.output(info.id, sleeper.pid, offset=0, wait_ms=1000)
                if not ended.process.running:
                    break
            listed = [p.pid for p in process.list(info.id)]
            return {
                "content": data.text,
                "size": data.size,
                "piece": head.text,
                "kind": st.kind,
                "entries": entries,
                "output": text,
                "exit_code": out.process.exit_code,
                "listed": started.pid in listed,
                "killed": ended.process.exit_code,
            }
        finally:
            container.remove(info.id)

    @tool("divide", read_only=True)
    def divide(self, a: float, b: float) -> float:
        """Divides a by b (b = 0 raises ZeroDivisionError, which reaches the caller as 5000).

        Args:
            a: The dividend.
            b: The divisor.
        """
        return a / b
