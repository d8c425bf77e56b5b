"""Row keys of the operator view: an op name, or with ``--group-by op+shapes`` an op name and
its Input Dims and Input type (compacted JSON text, so writers' spacing does not split rows)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from traceview.columns.model import TraceEvents

GRAPH_NO_OP = -2  # an op id for the kernels of a graph launch outside any op
PRELAUNCH = -3  # an op id for the kernels launched before the trace (analyses.core.prelaunch)


class OpKeys:
    """Group keys: the op name id (len(names) for no op, len(names) + 1 for a graph launch's
    kernels with no op, len(names) + 2 for kernels launched before the trace), and with
    shapes, the id of its (Input Dims, Input type) too (0 for none)."""

    def __init__(self, events: TraceEvents, with_shapes: bool) -> None:
        self.with_shapes = with_shapes
        self.texts: list[str | None] = [None]
        of_shape = np.zeros(len(events.shapes) + 1, dtype=np.int64)  # index shape id + 1
        if with_shapes:
            seen: dict[str, int] = {}
            for i, (dims, types, _) in enumerate(events.shapes):
                text = shape_text(dims, types)
                found = seen.setdefault(text, len(self.texts))
                if found == len(self.texts):
                    self.texts.append(text)
                of_shape[i + 1] = found
        self.of_shape = of_shape
        self.width = len(self.texts)
        self.n_names = len(events.names)
        self.graph_no_op = self.n_names + 1
        self.prelaunch = self.n_names + 2
        self.bound = (self.n_names + 3) * self.width

    def of(self, name: np.ndarray, shape: np.ndarray) -> np.ndarray:
        """The keys of (name id, NO_OP, GRAPH_NO_OP or PRELAUNCH, shape id or NO_SHAPE)
        pairs."""
        name = np.where(name == GRAPH_NO_OP, self.graph_no_op, name)
        name = np.where(name == PRELAUNCH, self.prelaunch, name)
        name = np.where(name < 0, self.n_names, name).astype(np.int64)
        keys: np.ndarray = name * self.width + self.of_shape[shape + 1]
        return keys

    def split(self, key: int) -> tuple[int, int]:
        return key // self.width, key % self.width

    def text(self, shape_key: int) -> str | None:
        return self.texts[shape_key] if self.with_shapes else None


def shape_text(dims: bytes, types: bytes) -> str:
    """Input Dims and Input type as one line: ``[[M, K], [K, N]] (float, float)``."""
    return f"{_compact(dims)} ({', '.join(map(str, _listed(types)))})"


def _compact(raw: bytes) -> str:
    try:
        return json.dumps(json.loads(raw), ensure_ascii=False)
    except (ValueError, UnicodeDecodeError):
        return raw.decode("utf-8", "replace")


def _listed(raw: bytes) -> list[Any]:
    try:
        value = json.loads(raw) if raw else []
    except (ValueError, UnicodeDecodeError):
        return [raw.decode("utf-8", "replace")]
    return value if isinstance(value, list) else [value]


def group_of(used: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Each key's index in the sorted ``used``, −1 when it is not there."""
    at = np.searchsorted(used, keys)
    at = np.minimum(at, max(len(used) - 1, 0))
    found = (used[at] == keys) if len(used) else np.zeros(len(keys), dtype=bool)
    return np.where(found, at, -1)
