"""placeholder: replaced by its owner."""

from __future__ import annotations

from .common import Subparsers


def register(subparsers: Subparsers) -> None:
    del subparsers
