"""Scenario cases: the YAML format, its schema, and the loader."""

from conformance.scenario.loader import (
    CaseLoadError,
    load_cases,
    load_file,
    shipped_catalogue,
)
from conformance.scenario.model import Case, Step

__all__ = ["Case", "CaseLoadError", "Step", "load_cases", "load_file", "shipped_catalogue"]
