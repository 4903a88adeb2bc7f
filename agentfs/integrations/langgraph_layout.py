"""Where a LangGraph thread lives in a store: run names made reversibly from arbitrary strings.

    <prefix>/<thread>/ctl                          the thread's generation pointer (latest commit wins)
    <prefix>/<thread>/g<gen>/<ns>/cp               checkpoints of one namespace, in LangGraph id order, each
                                                   followed by the put_writes commits made while it was the head
    <prefix>/<thread>/g<gen>/<ns>/late             put_writes for a checkpoint that was not the head (rare)
    <prefix>/<thread>/g<gen>/<ns>/w/<checkpoint>   the earlier layout's pending writes of one checkpoint (read only)
    <prefix>/byrun/x<h>                            threads that hold checkpoints of a LangGraph run_id whose
                                                   sha256 starts with hex digit h: one commit per (run_id, thread)
    <prefix>/byrun/<run_id>                        the earlier layout's index of one run_id (read only)

A string becomes one or more segments: every character outside [A-Za-z0-9.-] is written as `_xx`
per UTF-8 byte, the result is cut into pieces of at most 120 characters, each piece but the last
is prefixed with `p` and the last with `s`. A string whose escaped form is over 240 characters
becomes `h` and its sha256 instead (the saver then keeps the string in the commit's metadata), so
that a run name stays within agentfs's 1024 characters. The fixed names (ctl, g..., cp, late, w, byrun)
start with other letters, so a name parses back without ambiguity.
"""

from __future__ import annotations

import functools
import hashlib
import re
import string
from typing import NamedTuple

from ..names import check_name

PIECE = 120
READABLE = 2 * PIECE
MORE, END, HASHED = "p", "s", "h"
BUCKET = "x"  # 16 run index buckets, x0 to xf: not a letter an encoded string starts with
_KEEP = frozenset(string.ascii_letters + string.digits + ".-")
_ESCAPED = re.compile(r"(?:[A-Za-z0-9.-]|_[0-9a-f]{2})*")
_HASH = re.compile(HASHED + r"[0-9a-f]{64}")
GENERATION = re.compile(r"0|[0-9a-f]{32}")
INITIAL_GENERATION = "0"


@functools.lru_cache(maxsize=4096)  # every saver call names its runs from the same few thread ids and namespaces
def encode(text: str) -> str:
    """`text` as `/`-separated run name segments."""
    escaped = "".join(ch if ch in _KEEP else "".join(f"_{b:02x}" for b in ch.encode("utf-8", "surrogatepass")) for ch in text)
    if len(escaped) > READABLE:
        return HASHED + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    pieces = [escaped[i : i + PIECE] for i in range(0, len(escaped), PIECE)] or [""]
    return "/".join([*(MORE + piece for piece in pieces[:-1]), END + pieces[-1]])


def hashed(encoded: str) -> bool:
    return bool(_HASH.fullmatch(encoded))


def decode(segments: list[str], start: int) -> tuple[str | None, int]:
    """The string encoded from `segments[start]` on (None if hashed), and the index of the segment after it."""
    if start < len(segments) and hashed(segments[start]):
        return None, start + 1
    pieces = []
    index = start
    while True:
        if index >= len(segments) or segments[index][:1] not in (MORE, END):
            raise ValueError("not an encoded string")
        pieces.append(segments[index][1:])
        index += 1
        if segments[index - 1][0] == END:
            break
    escaped = "".join(pieces)
    if not _ESCAPED.fullmatch(escaped):
        raise ValueError("not an encoded string")
    raw = bytearray()
    position = 0
    while position < len(escaped):
        if escaped[position] == "_":
            raw.append(int(escaped[position + 1 : position + 3], 16))
            position += 3
        else:
            raw += escaped[position].encode()
            position += 1
    text = raw.decode("utf-8", "surrogatepass")
    if encode(text) != "/".join(segments[start:index]):
        raise ValueError("not the canonical encoding of its string")  # one string, one run name
    return text, index


class Namespace(NamedTuple):
    """One namespace of a thread in one generation: where its checkpoints are."""

    thread: str
    generation: str
    ns: str


class Parsed(NamedTuple):
    """A checkpoints run's name taken apart; a string is None where the name holds its hash."""

    thread: str | None
    generation: str
    ns: str | None


class Layout:
    def __init__(self, prefix: str) -> None:
        self.prefix = check_name(prefix, "run prefix")

    def thread_root(self, thread: str) -> str:
        return f"{self.prefix}/{encode(thread)}"

    def control(self, thread: str) -> str:
        return f"{self.thread_root(thread)}/ctl"

    def namespace_root(self, where: Namespace) -> str:
        return f"{self.thread_root(where.thread)}/g{where.generation}/{encode(where.ns)}"

    def checkpoints(self, where: Namespace) -> str:
        return f"{self.namespace_root(where)}/cp"

    def late(self, where: Namespace) -> str:
        return f"{self.namespace_root(where)}/late"

    def writes(self, where: Namespace, checkpoint_id: str) -> str:
        return f"{self.namespace_root(where)}/w/{encode(checkpoint_id)}"

    def by_run(self, run_id: str) -> str:
        return f"{self.prefix}/byrun/{encode(run_id)}"

    def run_bucket(self, run_id: str) -> str:
        """Where the threads of `run_id` are indexed: one of RUN_BUCKETS runs, however many LangGraph runs there are."""
        return f"{self.prefix}/byrun/{BUCKET}{hashlib.sha256(run_id.encode('utf-8', 'surrogatepass')).hexdigest()[0]}"

    def parse_checkpoints(self, run: str) -> Parsed | None:
        """The namespace whose checkpoints `run` holds, or None if `run` is anything else."""
        head = self.prefix + "/"
        if not (run.startswith(head) and run.endswith("/cp")):
            return None
        segments = run[len(head) : -len("/cp")].split("/")
        try:
            thread, index = decode(segments, 0)
            if index >= len(segments) or not GENERATION.fullmatch(segments[index][1:]) or segments[index][0] != "g":
                return None
            ns, end = decode(segments, index + 1)
        except ValueError:
            return None
        return Parsed(thread, segments[index][1:], ns) if end == len(segments) else None
