"""The read side of AgentFSStore with no I/O: filters, namespace conditions, embedding texts, cosine ranking.

Semantics follow LangGraph's reference InMemoryStore: a filter value that is a dict of `$` operators
compares (`$eq $ne $gt $gte $lt $lte`, the ordered ones as numbers), a plain dict compares nested
keys, a list compares element-wise, anything else by equality; `*` in a namespace condition matches
any one label.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
from langgraph.store.base import MatchCondition, PutOp, get_text_at_path, tokenize_path

from ...errors import AgentFSError
from .store_layout import Namespace

Vectors = dict[str, np.ndarray]  # the index field path (e.g. "text" or "tags.1") -> its embedding


class StoreError(AgentFSError, ValueError):
    """A store operation or configuration outside LangGraph's contract: an unknown operator, a wrong embedding size."""


_ORDERED: dict[str, Callable[[float, float], bool]] = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}
OPERATORS = {"$eq", "$ne", *_ORDERED}


def check_filter(conditions: dict[str, Any] | None) -> None:
    """Refuse an unknown `$` operator before any item is read (an empty namespace would hide it)."""
    for wanted in (conditions or {}).values():
        if isinstance(wanted, dict):
            unknown = sorted(name for name in wanted if name.startswith("$") and name not in OPERATORS)
            if unknown:
                raise StoreError(f"unsupported filter operator {unknown[0]!r}: use $eq, $ne, $gt, $gte, $lt or $lte")
            check_filter({key: inner for key, inner in wanted.items() if not key.startswith("$")})


def matches_filter(value: dict[str, Any], conditions: dict[str, Any] | None) -> bool:
    return not conditions or all(_matches(value.get(key), wanted) for key, wanted in conditions.items())


def _matches(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(key.startswith("$") for key in wanted):
            return all(_apply(found, name, operand) for name, operand in wanted.items())
        return isinstance(found, dict) and all(_matches(found.get(key), inner) for key, inner in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(found, (list, tuple))
            and len(found) == len(wanted)
            and all(_matches(item, expected) for item, expected in zip(found, wanted, strict=True))
        )
    return bool(found == wanted)


def _apply(found: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return bool(found == operand)
    if name == "$ne":
        return bool(found != operand)
    try:
        return _ORDERED[name](float(found), float(operand))
    except (TypeError, ValueError):
        return False  # a missing or non-numeric value is outside every range


def matches_conditions(namespace: Namespace, conditions: Iterable[MatchCondition]) -> bool:
    for condition in conditions:
        path = tuple(condition.path)
        if len(namespace) < len(path):
            return False
        if condition.match_type == "prefix":
            labels = namespace[: len(path)]
        elif condition.match_type == "suffix":
            labels = namespace[len(namespace) - len(path) :]
        else:
            raise StoreError(f"unsupported namespace match type {condition.match_type!r}: use 'prefix' or 'suffix'")
        if any(wanted != "*" and label != wanted for label, wanted in zip(labels, path, strict=True)):
            return False
    return True


def texts_to_embed(op: PutOp, default_fields: list[str]) -> list[tuple[str, str]]:
    """(field path, text) pairs a put indexes; a path matching several values yields `path.i` for each."""
    if op.value is None or op.index is False:
        return []
    fields = default_fields if op.index is None else list(op.index)
    found: list[tuple[str, str]] = []
    for path in fields:
        texts = get_text_at_path(op.value, path if path == "$" else tokenize_path(path))
        if len(texts) == 1:
            found.append((path, texts[0]))
        else:
            found.extend((f"{path}.{i}", text) for i, text in enumerate(texts))
    return found


def as_vector(embedding: Iterable[float], dims: int, where: str) -> np.ndarray:
    vector = np.asarray(list(embedding), dtype=np.float32)
    if vector.shape != (dims,):
        raise StoreError(f"{where}: the embed function returned {vector.shape[0]} dimensions, the index has dims={dims}")
    return vector


def best_scores(query: np.ndarray, candidates: list[Vectors]) -> list[float | None]:
    """Each candidate's highest cosine similarity to `query` (None for one with no vectors), computed at once."""
    owners = [i for i, vectors in enumerate(candidates) for _ in vectors]
    scores: list[float | None] = [None] * len(candidates)
    if not owners:
        return scores
    matrix = np.stack([vector for vectors in candidates for vector in vectors.values()]).astype(np.float64)
    norms = np.linalg.norm(matrix, axis=1) * float(np.linalg.norm(query))
    similarity = np.divide(matrix @ query.astype(np.float64), norms, out=np.zeros(len(owners)), where=norms != 0)
    for owner, score in zip(owners, similarity.tolist(), strict=True):
        best = scores[owner]
        scores[owner] = score if best is None else max(best, score)
    return scores
