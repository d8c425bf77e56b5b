"""traceview's build backend: maturin's, after one check. A source build compiles the core in
rust/, which needs a Rust toolchain; without one, maturin would try to download a toolchain
(and fail at length offline), so the build stops first with one line saying what to install.
A wheel needs none of this."""

from __future__ import annotations

import shutil
from typing import Any

import maturin

NO_RUST = (
    "traceview: building from source needs a Rust toolchain (cargo): install it from "
    "https://rustup.rs, or install a prebuilt wheel"
)


def _check() -> None:
    if shutil.which("cargo") is None:
        raise SystemExit(NO_RUST)


def get_requires_for_build_wheel(config_settings: Any = None) -> list[str]:
    _check()
    return maturin.get_requires_for_build_wheel(config_settings)


def get_requires_for_build_editable(config_settings: Any = None) -> list[str]:
    _check()
    return maturin.get_requires_for_build_editable(config_settings)


def get_requires_for_build_sdist(config_settings: Any = None) -> list[str]:
    return maturin.get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(directory: str, config_settings: Any = None) -> str:
    _check()
    return maturin.prepare_metadata_for_build_wheel(directory, config_settings)


def prepare_metadata_for_build_editable(directory: str, config_settings: Any = None) -> str:
    _check()
    return maturin.prepare_metadata_for_build_editable(directory, config_settings)


def build_wheel(
    directory: str, config_settings: Any = None, metadata_directory: str | None = None
) -> str:
    _check()
    return maturin.build_wheel(directory, config_settings, metadata_directory)


def build_editable(
    directory: str, config_settings: Any = None, metadata_directory: str | None = None
) -> str:
    _check()
    return maturin.build_editable(directory, config_settings, metadata_directory)


def build_sdist(directory: str, config_settings: Any = None) -> str:
    return maturin.build_sdist(directory, config_settings)
