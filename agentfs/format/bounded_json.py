"""The one JSON loader for bytes from outside (a remote's config, head keys, gc markers; a store's config).

json.loads recurses once per nested array or object: 100,000 `[` raise a bare RecursionError (and a
gc marker holding them stopped every later push). Here the size is capped first and the nesting is
measured without parsing (brackets outside strings, counted in C), so such input is a FormatError
naming where it came from. agentfs's own JSON records nest at most 3 deep.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any

from ..errors import FormatError

MAX_JSON_DEPTH = 32
# a string, or an unterminated one to the end (json.loads stops there): every match succeeds, so the scan is linear
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def nesting(data: bytes) -> int:
    """How deeply `data`'s arrays and objects nest (brackets inside strings do not count)."""
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def load_json(data: bytes, where: str, *, max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The JSON value `data` holds; FormatError naming `where` if it is over `max_bytes`, nests deeper than
    `max_depth`, or is not JSON (or not UTF-8)."""
    if len(data) > max_bytes:
        raise FormatError(f"{where} is {len(data)} bytes, over the {max_bytes}-byte limit; refused")
    depth = nesting(data)
    if depth > max_depth:
        raise FormatError(f"{where} nests JSON {depth} deep, over the limit of {max_depth}; refused")
    try:
        return json.loads(data)
    except ValueError as exc:  # UnicodeDecodeError included
        raise FormatError(f"{where} is not valid JSON: {exc}") from None
