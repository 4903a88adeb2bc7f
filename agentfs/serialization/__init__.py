"""State encoding: msgpack plus explicit, registered converters. Loading never imports or unpickles."""

from .converters import register
from .values import copy_value, decode_body, decode_value, encode_body, encode_value

__all__ = ["copy_value", "decode_body", "decode_value", "encode_body", "encode_value", "register"]
