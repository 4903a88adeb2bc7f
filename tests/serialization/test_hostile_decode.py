"""One hardened decoding boundary: bytes from a remote, a store's files or a caller are decoded under fixed
limits, and every refusal is an agentfs error naming where the bytes came from, never a crash, a bare
builtin error or a burst of memory.

- Depth: a value nested more than MAX_DEPTH containers deep is refused at commit (SerializationError
  naming its path) and at read (FormatError); one that deep round-trips. Each attempt runs in a child
  process: before the limit, 250 nested tuples killed every reader with SIGSEGV.
- Decompression bombs: an object whose frame declares (or decompresses to) more than the largest object
  is refused before it is decompressed, with peak memory measured in a child process.
- JSON from a remote (config, head keys, gc markers) under size and depth limits; a bad gc marker is
  reported and skipped, and pushes go on.
- Malformed values (a map key that is a list, a lone surrogate in a state key): agentfs errors.
"""

from __future__ import annotations

import json
import logging
import posixpath
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

import agentfs
from agentfs.errors import FormatError, IntegrityError, SerializationError
from agentfs.format import chunking, codec, keys, kinds, refs
from agentfs.format.bounded_json import MAX_JSON_DEPTH, load_json
from agentfs.serialization import decode_body, decode_value, encode_value
from agentfs.serialization.depth import MAX_DEPTH
from agentfs.serialization.values import MAP_BODY
from agentfs.sync.pack_remote import PackRemote, open_remote
from agentfs.sync.push import Pusher
from tests.helpers import remote_raw
from tests.helpers.bombs import KINDS as BOMB_KINDS
from tests.helpers.hostile import HostileRemote

AGENTFS = Path(sys.executable).with_name("agentfs")
BOMB_MEMORY = 64 << 20  # what refusing a bomb may cost, at most, over the process's baseline


def child(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run a helper module in a child process: a crash kills it, not pytest."""
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, check=False)


def deep(*args: str) -> list[str]:
    done = child("-m", "tests.helpers.deep_values", *args)
    assert done.returncode == 0, f"the child died (signal {-done.returncode})" if done.returncode < 0 else done.stderr[-2000:]
    return done.stdout.splitlines()


# depth


def test_values_at_the_depth_limit_round_trip_and_one_past_it_are_refused_at_commit(tmp_path: Path) -> None:
    lines = deep("sweep", str(tmp_path), str(MAX_DEPTH), str(MAX_DEPTH + 1))
    outcomes = {(kind, int(depth)): rest for kind, depth, rest in (line.split(" ", 2) for line in lines)}
    for kind in ("list", "tuple", "dict", "frozenset", "mixed"):
        assert outcomes[(kind, MAX_DEPTH)] == f"ok {MAX_DEPTH} ok {MAX_DEPTH}", kind
        refused = outcomes[(kind, MAX_DEPTH + 1)]
        assert refused.startswith('SerializationError: state["v"]'), (kind, refused)
        assert f"is nested {MAX_DEPTH + 1} containers deep" in refused and refused.endswith("no checkpoint"), (kind, refused)


@pytest.mark.parametrize(("kind", "depth"), [("tuple", 250), ("list", MAX_DEPTH + 1), ("mixed", MAX_DEPTH + 1)])
def test_a_value_stored_too_deep_is_refused_by_every_reader(tmp_path: Path, kind: str, depth: int) -> None:
    """Bytes a writer without the limit stored (250 tuples: accepted by commit, then SIGSEGV in every reader)."""
    store = str(tmp_path / "store")
    assert deep("forge", store, kind, str(depth)) == [f"ok {depth}"]
    [read] = deep("read", store)
    assert read.startswith("FormatError: deep@") and f"more than {MAX_DEPTH} deep" in read, read
    [served] = deep("mcp", store)
    assert served.startswith("FormatError: deep@"), served
    command = [str(AGENTFS), "--store", store, "show", "deep", "--state"]
    shown = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 4, (shown.returncode, shown.stderr[-2000:])
    assert shown.stderr.count("\n") == 1 and shown.stderr.startswith("agentfs: error: deep@"), shown.stderr


def test_a_crafted_ext_record_nested_past_the_limit_is_refused_before_it_is_decoded() -> None:
    value = msgpack.packb("bottom")
    for _ in range(5000):  # each level one tuple: before the limit, a C stack overflow long before the end
        value = msgpack.packb(msgpack.ExtType(1, b"\x91" + value))
    done = child("-c", f"from agentfs.serialization import decode_value\ndecode_value(bytes.fromhex({value.hex()!r}), 'crafted')")
    last_line = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 1 and last_line.startswith("agentfs.errors.FormatError: crafted: ext records nest"), done


# malformed values: agentfs errors, not TypeError or UnicodeError


def test_a_map_body_with_a_list_key_is_a_format_error() -> None:
    with pytest.raises(FormatError, match="state\\['m'\\] is not a valid value record: a map key is unhashable"):
        decode_body(MAP_BODY, 1, msgpack.packb([1]) + msgpack.packb(2), "state['m']")
    with pytest.raises(FormatError, match="crafted is not a valid value record"):
        decode_value(b"\x81\x91\x01\x02", "crafted")  # {[1]: 2}


def test_a_lone_surrogate_in_a_state_key_is_refused_at_commit_naming_it(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "store")
    with pytest.raises(SerializationError, match=r'state\["bad\\ud800"\]: the key is not valid text'):
        store.run("r").commit({"ok": 1, "bad\ud800": 2})
    with pytest.raises(SerializationError, match=r'state\["v"\] cannot be stored'):
        store.run("r").commit({"v": "x\udfff"})
    assert store.run("r").latest() is None


def test_encode_value_refuses_one_past_the_limit_and_keeps_the_limit() -> None:
    at_limit: object = "x"
    for _ in range(MAX_DEPTH):
        at_limit = [at_limit]
    assert decode_value(encode_value(at_limit), "v") == at_limit
    with pytest.raises(SerializationError, match=f"metadata\\[0\\].* is nested {MAX_DEPTH + 1} containers deep"):
        encode_value([at_limit], "metadata")


# decompression bombs


def test_no_object_a_writer_makes_is_over_the_largest_object() -> None:
    node = msgpack.packb([[bytes(32), (1 << 64) - 1]] * refs.NODE_MAX, use_bin_type=True)
    assert max(chunking.SMALL.max_size, chunking.LARGE.max_size, refs.PACK_MAX, len(node)) <= codec.MAX_OBJECT


@pytest.mark.parametrize("kind", BOMB_KINDS)
def test_a_decompression_bomb_is_refused_within_the_memory_bound(kind: str) -> None:
    """256 MiB of zeros in 8 KB: today 256 MiB are allocated before the hash check ("forged"), the bomb is
    installed ("valid": its hash holds), and a frame claiming 1 TiB raises a bare MemoryError."""
    done = child("-m", "tests.helpers.bombs", kind)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["outcome"].startswith("IntegrityError: object "), report
    assert report["peak_over_baseline"] <= BOMB_MEMORY, report


def test_an_object_larger_than_any_object_is_refused_raw_too() -> None:
    blob = codec.MAGIC + bytes((codec.VERSION, codec.RAW)) + bytes(codec.MAX_OBJECT + 1)
    with pytest.raises(IntegrityError, match="over the largest object"):
        codec.decode(blob, codec.hash_bytes(blob[codec.HEADER_SIZE :]), "raw")


def push(store: agentfs.Store, remote: HostileRemote) -> None:
    Pusher(store.engine, PackRemote(remote.url, remote.storage_options)).push()


def _artifact_store(root: Path) -> tuple[agentfs.Store, bytes]:
    """A store whose checkpoint holds one artifact stored as one LOOSE object; that object's id."""
    store = agentfs.open(root)
    data = bytes(range(256)) * 200  # 51 KB: one chunk (chunking.LARGE's smallest is 64 KiB)
    head = store.run("r").commit({"step": 1}, artifacts={"a.bin": data})
    ref = head.manifest.artifacts["a.bin"]
    assert isinstance(ref, refs.LooseRef)
    return store, ref.oid


def test_a_bomb_on_a_remote_is_refused_naming_the_remote_and_pack(tmp_path: Path, hostile_remote: HostileRemote) -> None:
    from tests.helpers.bombs import bomb

    store, oid = _artifact_store(tmp_path / "a")
    push(store, hostile_remote)
    _, blob = bomb("forged")
    hostile_remote.put_record(kinds.OBJECT, oid, blob)
    pack_id = hostile_remote.pack_of(kinds.OBJECT, oid)
    resumed = agentfs.open(tmp_path / "b", remote=hostile_remote.url, storage_options=hostile_remote.storage_options)
    head = resumed.run("r").latest()
    assert head is not None
    refusal = f"object {oid.hex()} at remote .* pack {pack_id} offset \\d+ is 268435456 bytes, over the largest object"
    with pytest.raises(IntegrityError, match=refusal) as refused:
        head.artifacts["a.bin"].read_bytes()
    assert f"at remote {PackRemote(hostile_remote.url, hostile_remote.storage_options).url} pack" in str(refused.value)
    pulled = subprocess.run(
        [str(AGENTFS), "clone", hostile_remote.url, str(tmp_path / "c"), "--storage-options", json.dumps(hostile_remote.storage_options)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # the entry that needs the bomb is skipped with one line naming the pack and why, the rest is cloned, and the
    # command ends with one error line and exit 4: never a traceback
    lines = pulled.stderr.splitlines()
    assert pulled.returncode == 4 and "Traceback" not in pulled.stderr and lines[-1].startswith("agentfs: error:"), pulled.stderr
    assert any(f"pack {pack_id}" in line and "over the largest object" in line for line in lines), pulled.stderr


# JSON from a remote


def test_the_bounded_loader_measures_nesting_outside_strings() -> None:
    assert load_json(b'{"a": ["[[[", {"b": "\\"]]"}]}', "x", max_bytes=100) == {"a": ["[[[", {"b": '"]]'}]}
    with pytest.raises(FormatError, match=f"x nests JSON {MAX_JSON_DEPTH + 1} deep"):
        load_json(b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "x", max_bytes=1000)
    with pytest.raises(FormatError, match="x is 11 bytes, over the 10-byte limit"):
        load_json(b"[1,2,3,4,5]", "x", max_bytes=10)
    with pytest.raises(FormatError, match="x is not valid JSON"):
        load_json(b'"\xff"', "x", max_bytes=10)


DEEP_JSON = b"[" * 100_000 + b"]" * 100_000  # a bare RecursionError in json.loads


def test_deep_json_in_a_remote_config_is_a_format_error_naming_the_remote(tmp_path: Path, hostile_remote: HostileRemote) -> None:
    store, _ = _artifact_store(tmp_path / "a")
    push(store, hostile_remote)
    hostile_remote.put(keys.CONFIG, DEEP_JSON)
    with pytest.raises(FormatError, match=r"remote .* config is 200000 bytes|remote .* config nests JSON"):
        open_remote(hostile_remote.url, hostile_remote.storage_options)


def test_deep_json_in_a_head_key_is_a_format_error_naming_it(tmp_path: Path, hostile_remote: HostileRemote) -> None:
    store, _ = _artifact_store(tmp_path / "a")
    push(store, hostile_remote)
    [head_key] = hostile_remote.head_keys("r")
    hostile_remote.put(head_key, DEEP_JSON)
    resumed = agentfs.open(tmp_path / "b", remote=hostile_remote.url, storage_options=hostile_remote.storage_options)
    with pytest.raises(FormatError, match=r"remote .* run 'r' head key \w+ nests JSON 100000 deep"):
        resumed.run("r").latest()


def test_a_bad_gc_marker_is_reported_and_skipped_and_pushes_go_on(
    tmp_path: Path, hostile_remote: HostileRemote, caplog: pytest.LogCaptureFixture
) -> None:
    store, _ = _artifact_store(tmp_path / "a")
    push(store, hostile_remote)
    gc_id = "01J00000000000000000000000"
    hostile_remote.put(posixpath.join(*keys.gc_marker_key(f"{gc_id}.plan")), DEEP_JSON)
    hostile_remote.put(posixpath.join(*keys.gc_marker_key(f"{gc_id}.done")), b"{}")
    for step in (2, 3):  # the second push too: the marker does not block later pushes
        head = store.run("r").commit({"step": step})
        with caplog.at_level(logging.WARNING, logger="agentfs.sync"):
            push(store, hostile_remote)
        assert remote_raw.has_head(hostile_remote.fs, hostile_remote.root, "r", head.id)
    warned = [r.getMessage() for r in caplog.records if r.name == "agentfs.sync" and gc_id in r.getMessage()]
    assert len(warned) == 1 and f"gc marker {gc_id}.plan nests JSON 100000 deep" in warned[0], warned
