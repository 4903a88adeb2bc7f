"""Record the file-system calls a workload makes under a directory: strace -f, parsed into POSIX ops.

The recorder knows system calls, not agentfs: it yields `Op`s (paths relative to the traced
directory) in the order strace printed them. A call that was still unfinished when its process
died never took effect and is dropped. Acknowledgements are `mkdir("/__ack__/<hex of JSON>")`
calls that fail with ENOENT: the workload makes one at the instant an API call returned.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

ACK_DIR = "/__ack__/"
ACK_CHUNK = 200  # hex characters per path component, under NAME_MAX
SYSCALLS = (
    "open,openat,creat,write,pwrite64,writev,pwritev,pwritev2,lseek,ftruncate,truncate,fallocate,"
    "rename,renameat,renameat2,link,linkat,unlink,unlinkat,mkdir,mkdirat,rmdir,"
    "fsync,fdatasync,sync_file_range,sync,syncfs,close,clone,clone3,fork,vfork"
)
STRING_LIMIT = 1 << 25  # -s: longer writes would be cut short in the trace (checked)
LINE = re.compile(r"^(\d+)\s+(\w+)\((.*)\)\s+=\s+(-?\d+)(?:<[^>]*>)?(?: .*)?$")
UNFINISHED = " <unfinished ...>"
RESUMED = re.compile(r"^(\d+)\s+<\.\.\. (\w+) resumed>(.*)$")
DECORATED = re.compile(r"^(?:(-?\d+)|AT_FDCWD)<((?:\\x[0-9a-f]{2})*)>$")
HEX_STRING = re.compile(r'^"((?:\\x[0-9a-f]{2})*)"$')


@dataclasses.dataclass(frozen=True)
class Op:
    """One file-system change (or sync, or acknowledgement); `path`/`target` are relative to the root."""

    kind: str  # open write truncate fsync mkdir rmdir unlink rename link syncall ack
    path: str = ""
    target: str = ""
    offset: int = 0
    data: bytes = b""
    flags: frozenset[str] = frozenset()
    pid: int = 0
    ack: dict[str, Any] | None = dataclasses.field(default=None, compare=False)


def ack(payload: dict[str, Any]) -> None:
    """Mark in the trace that the call described by `payload` was acknowledged (returned) just now."""
    blob = json.dumps(payload, sort_keys=True).encode().hex()
    path = ACK_DIR + "/".join(blob[i : i + ACK_CHUNK] for i in range(0, len(blob), ACK_CHUNK))
    try:
        os.mkdir(path)
    except FileNotFoundError:
        return
    raise RuntimeError(f"{ACK_DIR} exists on this machine: acknowledgements would not show in the trace")


def record(command: list[str], root: Path, trace_file: Path, env: dict[str, str], timeout: float) -> list[Op]:
    """Run `command` under strace, following every process and thread; the ops that touch `root`."""
    strace = ["strace", "-f", "-qq", "-yy", "-xx", "-s", str(STRING_LIMIT), "-e", f"trace={SYSCALLS}", "-o", str(trace_file)]
    subprocess.run([*strace, "--", *command], env=env, check=True, timeout=timeout)
    return parse(trace_file.read_text(), root)


def _unhex(text: str) -> bytes:
    return bytes.fromhex(text.replace("\\x", ""))


def _split_args(text: str) -> list[str]:
    """Top-level comma-separated arguments (strings are hex escaped, so no quote holds a comma)."""
    args, depth, start, quoted = [], 0, 0, False
    for i, char in enumerate(text):
        if char == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif char in "([{<":
            depth += 1
        elif char in ")]}>":
            depth -= 1
        elif char == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
    args.append(text[start:].strip())
    return args


@dataclasses.dataclass
class _OpenFile:
    offset: int
    append: bool


class _Parser:
    def __init__(self, root: Path, clones: dict[int, tuple[int, bool]]) -> None:
        self.root = str(root)
        self.clones = clones  # child tid -> (parent tid, shares the fd table)
        self.tables: dict[int, dict[int, _OpenFile]] = {}
        self.ops: list[Op] = []

    def table(self, tid: int) -> dict[int, _OpenFile]:
        if tid not in self.tables:
            parent = self.clones.get(tid)
            if parent is None:
                self.tables[tid] = {}
            else:
                inherited = self.table(parent[0])
                self.tables[tid] = inherited if parent[1] else dict(inherited)
        return self.tables[tid]

    def relative(self, path: str) -> str | None:
        if path == self.root:
            return "."
        if path.startswith(self.root + "/"):
            return path[len(self.root) + 1 :]
        return None

    def path_arg(self, dirfd: str | None, name: str) -> str | None:
        """The path a (dirfd, "name") pair names, relative to the root; None outside it."""
        match = HEX_STRING.match(name)
        if match is None:
            return None
        path = _unhex(match.group(1)).decode(errors="surrogateescape")
        if not path.startswith("/"):
            base = DECORATED.match(dirfd or "")
            if base is None:
                raise ValueError(f"relative path {path!r} without a resolved directory fd: run strace with -yy")
            path = os.path.normpath(_unhex(base.group(2)).decode(errors="surrogateescape") + "/" + path)
        return self.relative(os.path.normpath(path))

    def fd_arg(self, text: str) -> tuple[int, str | None]:
        match = DECORATED.match(text)
        if match is None or match.group(1) is None:
            return -1, None
        path = _unhex(match.group(2)).decode(errors="surrogateescape")
        return int(match.group(1)), None if path.endswith(" (deleted)") else self.relative(path)

    def line(self, tid: int, name: str, raw_args: str, result: int) -> None:
        args = _split_args(raw_args)
        if name == "mkdir" and result < 0 and args[0].startswith('"'):
            path = _unhex(args[0].strip('"')).decode()
            if path.startswith(ACK_DIR):
                self.ops.append(Op("ack", pid=tid, ack=json.loads(bytes.fromhex(path[len(ACK_DIR) :].replace("/", "")))))
            return
        if result < 0:
            return
        handler = getattr(self, f"on_{name}", None)
        if handler is not None:
            handler(tid, args, result)

    def emit(self, kind: str, tid: int, path: str | None, **fields: Any) -> None:
        if path is not None:
            self.ops.append(Op(kind, path, pid=tid, **fields))

    def on_open(self, tid: int, args: list[str], result: int) -> None:
        self._opened(tid, self.path_arg(None, args[0]), args[1], result)

    def on_openat(self, tid: int, args: list[str], result: int) -> None:
        self._opened(tid, self.path_arg(args[0], args[1]), args[2], result)

    def on_creat(self, tid: int, args: list[str], result: int) -> None:
        self._opened(tid, self.path_arg(None, args[0]), "O_CREAT|O_WRONLY|O_TRUNC", result)

    def _opened(self, tid: int, path: str | None, flag_text: str, fd: int) -> None:
        if path is None:
            return
        flags = frozenset(flag_text.split("|")) & {"O_CREAT", "O_TRUNC", "O_APPEND", "O_DIRECTORY"}
        self.table(tid)[fd] = _OpenFile(0, "O_APPEND" in flags)
        self.emit("open", tid, path, flags=flags)

    def on_close(self, tid: int, args: list[str], result: int) -> None:
        self.table(tid).pop(self.fd_arg(args[0])[0], None)

    def on_lseek(self, tid: int, args: list[str], result: int) -> None:
        fd, path = self.fd_arg(args[0])
        if path is not None:
            self.table(tid).setdefault(fd, _OpenFile(0, False)).offset = result

    def _written(self, tid: int, fd_text: str, data: bytes, result: int, offset: int | None) -> None:
        fd, path = self.fd_arg(fd_text)
        if path is None:
            return
        if len(data) < result:
            raise ValueError(f"strace cut a write to {path} short ({len(data)} of {result} bytes): raise STRING_LIMIT")
        handle = self.table(tid).get(fd)
        if handle is None:
            raise ValueError(f"write to {path} through fd {fd}, whose open was not traced")
        if offset is None:
            offset = -1 if handle.append else handle.offset  # -1: at the end of the file
            handle.offset += result
        self.emit("write", tid, path, offset=offset, data=data[:result])

    def on_write(self, tid: int, args: list[str], result: int) -> None:
        self._written(tid, args[0], _unhex(args[1].strip('"')), result, None)

    def on_pwrite64(self, tid: int, args: list[str], result: int) -> None:
        self._written(tid, args[0], _unhex(args[1].strip('"')), result, int(args[3]))

    def _vector(self, text: str) -> bytes:
        return b"".join(_unhex(m) for m in re.findall(r'iov_base="((?:\\x[0-9a-f]{2})*)"', text))

    def on_writev(self, tid: int, args: list[str], result: int) -> None:
        self._written(tid, args[0], self._vector(args[1]), result, None)

    def on_pwritev(self, tid: int, args: list[str], result: int) -> None:
        self._written(tid, args[0], self._vector(args[1]), result, int(args[3]))

    on_pwritev2 = on_pwritev

    def on_ftruncate(self, tid: int, args: list[str], result: int) -> None:
        self.emit("truncate", tid, self.fd_arg(args[0])[1], offset=int(args[1]))

    def on_truncate(self, tid: int, args: list[str], result: int) -> None:
        self.emit("truncate", tid, self.path_arg(None, args[0]), offset=int(args[1]))

    def on_fallocate(self, tid: int, args: list[str], result: int) -> None:
        if "KEEP_SIZE" not in args[1] and "PUNCH_HOLE" not in args[1]:
            self.emit("truncate", tid, self.fd_arg(args[0])[1], offset=int(args[2]) + int(args[3]), flags=frozenset({"extend"}))

    def on_fsync(self, tid: int, args: list[str], result: int) -> None:
        self.emit("fsync", tid, self.fd_arg(args[0])[1])

    on_fdatasync = on_fsync  # the data and the size needed to read it back: all the model keeps

    def on_sync(self, tid: int, args: list[str], result: int) -> None:
        self.ops.append(Op("syncall", pid=tid))

    on_syncfs = on_sync

    def on_mkdir(self, tid: int, args: list[str], result: int) -> None:
        self.emit("mkdir", tid, self.path_arg(None, args[0]))

    def on_mkdirat(self, tid: int, args: list[str], result: int) -> None:
        self.emit("mkdir", tid, self.path_arg(args[0], args[1]))

    def on_rmdir(self, tid: int, args: list[str], result: int) -> None:
        self.emit("rmdir", tid, self.path_arg(None, args[0]))

    def on_unlink(self, tid: int, args: list[str], result: int) -> None:
        self.emit("unlink", tid, self.path_arg(None, args[0]))

    def on_unlinkat(self, tid: int, args: list[str], result: int) -> None:
        self.emit("rmdir" if "AT_REMOVEDIR" in args[2] else "unlink", tid, self.path_arg(args[0], args[1]))

    def _pair(self, kind: str, tid: int, source: str | None, target: str | None) -> None:
        if (source is None) != (target is None):
            raise ValueError(f"{kind} across the traced directory's boundary ({source} -> {target}) is not modelled")
        self.emit(kind, tid, source, target=target)

    def on_rename(self, tid: int, args: list[str], result: int) -> None:
        self._pair("rename", tid, self.path_arg(None, args[0]), self.path_arg(None, args[1]))

    def on_renameat(self, tid: int, args: list[str], result: int) -> None:
        if len(args) > 4 and "RENAME_EXCHANGE" in args[4]:
            raise ValueError("renameat2(RENAME_EXCHANGE) is not modelled")
        self._pair("rename", tid, self.path_arg(args[0], args[1]), self.path_arg(args[2], args[3]))

    on_renameat2 = on_renameat

    def on_link(self, tid: int, args: list[str], result: int) -> None:
        self._pair("link", tid, self.path_arg(None, args[0]), self.path_arg(None, args[1]))

    def on_linkat(self, tid: int, args: list[str], result: int) -> None:
        self._pair("link", tid, self.path_arg(args[0], args[1]), self.path_arg(args[2], args[3]))


def _joined(text: str) -> list[str]:
    """Lines with each `<unfinished ...>` call joined to its `<... resumed>` rest, placed where it completed."""
    pending: dict[str, str] = {}
    lines = []
    for line in text.splitlines():
        if line.endswith(UNFINISHED):
            pending[line.split(None, 1)[0]] = line[: -len(UNFINISHED)]
            continue
        resumed = RESUMED.match(line)
        if resumed is not None:
            start = pending.pop(resumed.group(1), None)
            if start is not None:
                lines.append(start + resumed.group(3))
            continue
        lines.append(line)
    return lines  # calls still pending belonged to a process that was killed in them: no effect


def parse(text: str, root: Path) -> list[Op]:
    calls = []
    clones: dict[int, tuple[int, bool]] = {}
    for line in _joined(text):
        match = LINE.match(line)
        if match is None:
            continue
        tid, name, args, result = int(match.group(1)), match.group(2), match.group(3), int(match.group(4))
        if name in ("clone", "clone3", "fork", "vfork"):
            if result > 0:
                clones[result] = (tid, "CLONE_FILES" in args)
            continue
        calls.append((tid, name, args, result))
    parser = _Parser(root, clones)
    for call in calls:
        parser.line(*call)
    return parser.ops
