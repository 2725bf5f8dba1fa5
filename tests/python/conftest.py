"""Shared pytest fixtures: where the stax build lives."""
import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def stax_bin():
    build = pathlib.Path(os.environ.get("STAX_BUILD_DIR", REPO / "build"))
    path = build / "stax"
    if not path.exists():
        pytest.fail(f"stax program not built at {path}; run 'make build' first")
    return str(path)
