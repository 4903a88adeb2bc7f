"""Every name a store or a remote holds, in one place (docs/FORMAT.md, "Layout").

A key is a tuple of path parts, joined by the caller: `Path.joinpath` locally, `posixpath.join`
under a remote's root. Locally records live in segments/ (format/kinds.py names them); a remote
holds packs/, heads/, retired/ and gc/ beside its config; a run's name appears in a key only as its
digest, so names like `a/b` never nest.
"""

from __future__ import annotations

import hashlib

from ..ids import CROCKFORD
from ..names import ID

CONFIG = "config"
LOCKS = "locks"
TMP = "tmp"
REMOTES = "remotes"
GC = "gc"  # remote only: remote gc markers
SEGMENTS = "segments"  # format 2: the local store's append-only segment files
KEY_SLOTS = "keys"  # an encrypted store's (and remote's) key slots, one file each (format/crypto.py)

LOG_RECORDS, JOURNAL_RECORDS, RETIRED_RECORDS = "log", "journal", "retired"  # a run's kinds of record, each named by a ULID
RECORD_NAMES = (LOG_RECORDS, JOURNAL_RECORDS, RETIRED_RECORDS)

GC_LOCK = (LOCKS, "gc")
CONFIG_LOCK = (LOCKS, "config")

# format 2's locks/: a fixed set made at init, never a file per run or per commit
STRIPES = 32  # run-NN (appending) and journal-NN (journal_lock): a run's stripe is digest(run) mod STRIPES


def stripe_name(kind: str, stripe: int) -> str:
    return f"{kind}-{stripe:02d}"


def stripe_lock_key(kind: str, run: str) -> tuple[str, str]:
    """locks/<kind>-NN: the lock of `run`'s stripe, kind "run" or "journal"."""
    return (LOCKS, stripe_name(kind, int(digest(run)[:8], 16) % STRIPES))


def digest(name: str) -> str:
    """A fixed-length file name for a run name: nested names would collide and may exceed NAME_MAX.
    (An encrypted store's run names are its stored names, format/crypto.py: the digest names no plaintext.)"""
    return hashlib.sha256(name.encode()).hexdigest()


def key_slot_key(slot_id: str) -> tuple[str, str]:
    """keys/<slot id>: one key slot of an encrypted remote (as locally)."""
    return (KEY_SLOTS, slot_id)


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
    """heads/<digest(run)>: one key per head a push moved the run to, named by head_name(the head's id)."""
    return (HEADS, digest(run))


# A head key's name is its id with each character mapped to its complement in the Crockford alphabet
# (0<->Z, 1<->Y, ...): names sort in the reverse order of ids, so the first name of an ascending
# listing (one request of one key on S3 and GCS) is the greatest id, whatever the history's length.
_COMPLEMENT = str.maketrans(CROCKFORD, CROCKFORD[::-1])


def head_name(checkpoint_id: str) -> str:
    return checkpoint_id.translate(_COMPLEMENT)


# An id begins with 0-7 (the top of its 48-bit millisecond), so every head name sorts after this, and
# a name at or before it that is an id is a draft's head key (PackRemote.head_id refuses it).
HEAD_NAMES_AFTER = head_name("7")


def head_id_of(name: str) -> str | None:
    """The id a head key's name stands for; None for a name no head key has (a stray or damaged key)."""
    checkpoint_id = head_name(name)  # the complement is its own inverse
    return checkpoint_id if name > HEAD_NAMES_AFTER and ID.fullmatch(checkpoint_id) else None


def head_key(run: str, checkpoint_id: str) -> tuple[str, str, str]:
    return (*head_dir_key(run), head_name(checkpoint_id))


def retired_dir_key(run: str) -> tuple[str, str]:
    """retired/<digest(run)>: the run's retirement records again, one key each (also in packs), so a
    reader learns what retention removed with one listing, whatever the number of packs."""
    return (RETIRED_RECORDS, digest(run))


def retired_key(run: str, record_id: str) -> tuple[str, str, str]:
    return (*retired_dir_key(run), record_id)
