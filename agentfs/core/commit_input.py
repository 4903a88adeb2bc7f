"""What a commit is given, checked and encoded before a byte is written: its state and its artifact sources."""

from __future__ import annotations

import functools
import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, Union

from ..errors import NotFound, SerializationError
from ..format import chunking
from ..format.manifest import MAP_STATE, MAX_VALUE, VALUE_STATE
from ..format.refs import Ref
from ..names import check_name
from ..objects.blobs import BlobWriter
from ..serialization import encode_body
from .checkpoint import Artifact
from .extend import Extend, Extension, encode_extension

ByteSource = Union[bytes, bytearray, memoryview, str, "os.PathLike[str]", IO[bytes]]
ArtifactSource = ByteSource | Artifact


EncodedValue = tuple[int, int, bytes] | Extension  # (format, count, bytes), or the new items of an Extend


def encode_state(state: Any) -> tuple[str, dict[str, EncodedValue]]:
    """A dict with str keys is stored key by key, so an unchanged key costs nothing next time."""
    if type(state) is dict and all(type(key) is str for key in state):
        for key in state:
            if not key.isascii():
                _check_text(key)
        return MAP_STATE, {key: _encode_value(key, value) for key, value in state.items()}
    return VALUE_STATE, {"": _sized(encode_body(state, "state"), None)}


def _sized(encoded: tuple[int, int, bytes], key: str | None) -> tuple[int, int, bytes]:
    """`encoded` unless it is over the largest value, which every reader refuses (objects/blobs.py BlobReader.read)."""
    if len(encoded[2]) > MAX_VALUE:
        what = "state" if key is None else _key_path(key)
        raise SerializationError(f"{what} is {len(encoded[2])} bytes encoded, over the largest value ({MAX_VALUE}): make it an artifact")
    return encoded


def _encode_value(key: str, value: Any) -> EncodedValue:
    if type(value) is Extend:
        return encode_extension(value, _key_path(key))
    return _sized(encode_body(value, functools.partial(_key_path, key)), key)


def check_extends(values: dict[str, EncodedValue], parent: Any) -> None:
    """An Extend extends the parent's list: refused unless the commit names its parent (a str id, or None)."""
    if not (parent is None or isinstance(parent, str)):
        for key, value in values.items():
            if isinstance(value, Extension):
                raise SerializationError(f"{_key_path(key)} is an Extend: commit it with parent= the head's id (None on an empty run)")


def _check_text(key: str) -> None:
    """Refuse a state key that is not UTF-8 text (a lone surrogate, from a bad decode): the manifest stores it as UTF-8."""
    try:
        key.encode()
    except UnicodeEncodeError as exc:
        raise SerializationError(f"state[{json.dumps(key)}]: the key is not valid text ({exc.reason}); it cannot be stored") from None


def _key_path(key: str) -> str:
    return 'state["' + key.replace("\\", "\\\\").replace('"', '\\"') + '"]'


def check_artifacts(artifacts: Mapping[str, ArtifactSource]) -> dict[str, ArtifactSource]:
    """Every artifact's name and source, checked before a single byte is written."""
    if not isinstance(artifacts, Mapping):
        raise SerializationError(f"artifacts must be a mapping of name -> bytes, path, file or Artifact, got {type(artifacts).__name__}")
    checked: dict[str, ArtifactSource] = {}
    for name, source in artifacts.items():
        check_name(name, "artifact")
        if isinstance(source, (str, os.PathLike)):
            path = Path(source)
            if not path.is_file():
                meaning = " (a str source is a path; give bytes, e.g. text.encode(), for content)" if isinstance(source, str) else ""
                raise NotFound(f"artifact {name!r}: {path} is not a readable file{meaning}")
        elif isinstance(source, io.TextIOBase):
            raise SerializationError(f"artifact {name!r} is a text stream; open the file in binary mode ('rb')")
        elif not isinstance(source, (bytes, bytearray, memoryview, Artifact)):
            if not hasattr(source, "read"):
                kind = type(source).__name__
                raise SerializationError(f"artifact {name!r} is a {kind}; give bytes, a path, a binary file or an Artifact")
            _check_readable(name, source)
        checked[name] = source
    return checked


def _check_readable(name: str, source: Any) -> None:
    """A file-like source must be open for reading: a closed or write-only one would fail mid-commit with a bare
    ValueError or io.UnsupportedOperation (tests/cli/test_first_use.py)."""
    described = f"artifact {name!r} ({getattr(source, 'name', type(source).__name__)})"
    if getattr(source, "closed", False):
        raise SerializationError(f"{described} is a closed file; give an open binary file ('rb'), bytes or a path")
    readable = getattr(source, "readable", None)
    if callable(readable) and not readable():
        raise SerializationError(f"{described} is not open for reading (mode {getattr(source, 'mode', '?')!r}); open it with 'rb'")


def put_artifact(blobs: BlobWriter, source: ByteSource) -> Ref:
    if isinstance(source, (bytes, bytearray, memoryview)):
        return blobs.put(bytes(source), chunking.LARGE)
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as handle:
            return blobs.put_stream(handle)
    return blobs.put_stream(source)
