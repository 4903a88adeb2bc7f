"""The local store: config, run logs, manifests, checkpoints and maintenance."""
