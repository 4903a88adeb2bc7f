"""The storage engine: where records live on disk, locks, durability, and hints of change."""
