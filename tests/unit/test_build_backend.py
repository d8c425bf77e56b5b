"""The build backend (rust/backend): a source build without cargo stops with one line saying
what to install, before maturin runs; an sdist needs no toolchain."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ROOT


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Any:
    pytest.importorskip("maturin")
    monkeypatch.syspath_prepend(str(ROOT / "rust" / "backend"))
    import traceview_build

    monkeypatch.setattr(traceview_build.shutil, "which", lambda name: None)  # no cargo
    return traceview_build


@pytest.mark.parametrize(
    "hook",
    [
        "get_requires_for_build_wheel",
        "get_requires_for_build_editable",
        "prepare_metadata_for_build_wheel",
        "prepare_metadata_for_build_editable",
        "build_wheel",
        "build_editable",
    ],
)
def test_a_build_without_cargo_stops_with_one_line(backend: Any, hook: str) -> None:
    args = () if hook.startswith("get_requires") else ("unused-directory",)
    with pytest.raises(SystemExit) as stop:
        getattr(backend, hook)(*args)
    message = str(stop.value.code)
    assert message == backend.NO_RUST
    assert "\n" not in message and "https://rustup.rs" in message


def test_an_sdist_is_built_without_checking_for_cargo(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backend.maturin, "build_sdist", lambda directory, settings: "sdist")
    assert backend.build_sdist("unused-directory") == "sdist"
