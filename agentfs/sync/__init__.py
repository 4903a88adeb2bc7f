"""Mirroring a store to an fsspec remote, and reading it back on another machine."""
