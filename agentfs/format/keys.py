"""Every name a store or a remote holds, in one place (docs/FORMAT.md, "Layout").

A key is a tuple of path parts, joined by the caller: `Path.joinpath` locally, `posixpath.join`
under a remote's root. Runs named `a/b` nest as directories; the store's own names never collide with
a run's, because a run's records live under runs/<run>/<kind>/ and run names cannot end in a kind.
"""

from __future__ import annotations

import hashlib

CONFIG = "config"
OBJECTS = "objects"
RUNS = "runs"
LOCKS = "locks"
TMP = "tmp"
REMOTES = "remotes"
FORKS = "forks"
GC = "gc"  # remote only: remote gc markers

LOG, JOURNAL, RETIRED = "log", "journal", "retired"  # what a run's directory holds, each named by ULIDs
RECORD_KINDS = (LOG, JOURNAL, RETIRED)

RUN_LOCKS = (LOCKS, "runs")
GC_LOCK = (LOCKS, "gc.lock")
CONFIG_LOCK = (LOCKS, "config.lock")
PRUNED = (LOCKS, "pruned")  # replaced by every prune, so commits drop caches of referenced objects
FORKS_INDEXED = (FORKS, "indexed")  # present once forks/ names every fork in the store


def digest(name: str) -> str:
    """A fixed-length file name for a run name: nested names would collide and may exceed NAME_MAX."""
    return hashlib.sha256(name.encode()).hexdigest()


def object_key(oid: bytes) -> tuple[str, str, str]:
    """objects/<first 2 hex digits>/<other 62>."""
    name = oid.hex()
    return (OBJECTS, name[:2], name[2:])


def record_dir_key(run: str, kind: str) -> tuple[str, ...]:
    """runs/<run>/<kind>: a run's LOG entries, JOURNAL records or RETIRED records."""
    return (RUNS, *run.split("/"), kind)


def record_key(run: str, kind: str, record_id: str) -> tuple[str, ...]:
    return (*record_dir_key(run, kind), record_id)


def run_lock_key(run: str) -> tuple[str, str, str]:
    return (*RUN_LOCKS, f"{digest(run)}.lock")


def fork_key(source: str, target: str) -> tuple[str, str, str]:
    """forks/<digest(source)>/<digest(target)>, holding the target's name: target may borrow from source."""
    return (FORKS, digest(source), digest(target))


def gc_marker_key(name: str) -> tuple[str, str]:
    return (GC, name)


# format 2's remote (docs/FORMAT.md, "Remote layout"): packs, their indexes, head keys
PACKS = "packs"
HEADS = "heads"
PACK_SUFFIX, PACK_INDEX_SUFFIX = ".pack", ".idx"


def pack_key(pack_id: str) -> tuple[str, str]:
    """packs/<16 hex digits>.pack: a sealed segment holding records of one push."""
    return (PACKS, f"{pack_id}{PACK_SUFFIX}")


def pack_index_key(pack_id: str) -> tuple[str, str]:
    """packs/<16 hex digits>.idx: the pack's footer frame and trailer, the pack's last bytes."""
    return (PACKS, f"{pack_id}{PACK_INDEX_SUFFIX}")


def head_dir_key(run: str) -> tuple[str, str]:
    """heads/<digest(run)>: one key per head a push moved the run to, named by the head's id."""
    return (HEADS, digest(run))


def head_key(run: str, checkpoint_id: str) -> tuple[str, str, str]:
    return (*head_dir_key(run), checkpoint_id)


def retired_dir_key(run: str) -> tuple[str, str]:
    """retired/<digest(run)>: the run's retirement records again, one key each (also in packs), so a
    reader learns what retention removed with one listing, whatever the number of packs."""
    return (RETIRED, digest(run))


def retired_key(run: str, record_id: str) -> tuple[str, str, str]:
    return (*retired_dir_key(run), record_id)
