"""The byte formats of docs/FORMAT.md, without I/O.

Records, refs and tree nodes, manifests, entries, config, key names, and the one walk over what a checkpoint needs.
"""
