"""Work launched before the trace began, against a plain reading of the trace: GPU activities
whose correlation no runtime call carries, starting before the first launched activity on
their device (docs/metrics.md, "Launched before the trace")."""

from __future__ import annotations

import numpy as np
import pytest
import reference
from conftest import SHARED_TRACES, RealTrace

from traceview.analyses.core.prelaunch import launched_before_trace

H200 = SHARED_TRACES / "h200"


def _reference(raw: list[dict[str, object]]) -> tuple[int, int]:
    """(how many, their summed duration in ns), by the definition, event by event."""
    gpu = [e for e in raw if reference.gpu_kind(e) is not None]
    launches = {
        e["args"].get("correlation")  # type: ignore[union-attr]
        for e in raw
        if e.get("ph") == "X"
        and str(e.get("cat", "")).lower() in ("cuda_runtime", "cuda_driver", "runtime")
        and isinstance(e.get("args"), dict)
    }
    launches.discard(None)

    def device(e: dict[str, object]) -> object:
        return e.get("args", {}).get("device")  # type: ignore[union-attr]

    def corr(e: dict[str, object]) -> object:
        return e.get("args", {}).get("correlation", -1)  # type: ignore[union-attr]

    first: dict[object, int] = {}
    for e in gpu:
        if corr(e) in launches:
            ts = reference.ts_ns(e)
            assert ts is not None
            first[device(e)] = min(first.get(device(e), ts), ts)
    if not first:
        return 0, 0
    before = [
        e
        for e in gpu
        if corr(e) not in launches and (reference.ts_ns(e) or 0) < first.get(device(e), -(2**63))
    ]
    return len(before), sum(reference.dur_ns(e) for e in before)


def test_matches_reference(real_trace: RealTrace) -> None:
    mask = launched_before_trace(real_trace.events)
    got = (int(mask.sum()), int(real_trace.events.gpu.dur[mask].sum()))
    assert got == _reference(real_trace.raw)


@pytest.mark.parametrize(("name", "count"), [("train", 619), ("big", 757), ("eager", 0)])
def test_h200_warm_up_tail(name: str, count: int) -> None:
    """train and big start with the warm-up step's queued tail (the h200 README); eager none."""
    path = H200 / f"{name}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} is absent")
    mask = launched_before_trace(RealTrace(path).events)
    assert int(np.count_nonzero(mask)) == count
