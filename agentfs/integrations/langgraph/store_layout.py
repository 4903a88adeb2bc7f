"""Where AgentFSStore keeps a namespace: one run per namespace, named reversibly from its labels.

    <prefix>/<label>/.../<label>/items     each label encoded as in ../langgraph_layout.py (p/s pieces, or h<sha256>)
    <prefix>/h<sha256 of the labels>/items a namespace whose name would pass agentfs's length limit

A name that holds a hash is read back from the namespace its commits record in their metadata.
"""

from __future__ import annotations

import hashlib
import json

from ...names import MAX_NAME
from ..langgraph_layout import HASHED, decode, encode

ITEMS = "items"
Namespace = tuple[str, ...]


def namespace_run(prefix: str, ns: Namespace) -> str:
    name = "/".join([prefix, *(encode(label) for label in ns), ITEMS])
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(json.dumps(list(ns)).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{prefix}/{HASHED}{digest}/{ITEMS}"


def parse_namespace_run(prefix: str, run: str) -> Namespace | bool:
    """The namespace `run` holds; True if its name holds a hash (read its commits), False if it is no namespace's run."""
    head, tail = prefix + "/", "/" + ITEMS
    if not (run.startswith(head) and run.endswith(tail)) or len(run) <= len(head) + len(tail):
        return False
    segments = run[len(head) : -len(tail)].split("/")
    labels: list[str] = []
    index = 0
    try:
        while index < len(segments):
            label, index = decode(segments, index)
            if label is None:
                return True
            labels.append(label)
    except ValueError:
        return False  # another run under the prefix
    return tuple(labels)
