"""Protocols found, not listed: every module of a package is imported, and each adds its
protocols to ``rubrics.grading.PROTOCOLS`` (``rubrics/protocols/``). Pure."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType


def discover(package: ModuleType) -> list[str]:
    """Import every module of ``package`` (each registers its protocols); their names."""
    found = pkgutil.iter_modules(package.__path__, f"{package.__name__}.")
    return [importlib.import_module(module.name).__name__ for module in found]
