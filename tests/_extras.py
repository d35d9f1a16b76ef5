"""Importing an optional extra in tests: skip on a user's machine without it, fail under ``CI``.

Every test module of an extra (models, MCP, the framework adapters) starts with
``sdk = require_extra("openai", "openai")``: where the package is missing the module skips with a
reason that names the ``pip install`` line; when ``CI`` is set a missing extra is a failure, because
CI installs every extra and must not go green without running these tests.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def require_extra(module: str, extra: str) -> ModuleType:
    """Import ``module`` (a package of the ``[extra]`` extra) or skip/fail the calling module."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = (
            f"{module} is not installed ({exc}); install it with "
            f"pip install -e '.[{extra}]' (or '.[dev,all]' for every extra)"
        )
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
