"""Features over the engine: runs, checkpoints, the journal, schemas, retention, maintenance, watching."""
