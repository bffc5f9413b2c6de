"""Scenario cases: the YAML format, its schema, the loader, and the catalogue a run loaded."""

from conformance.scenario.catalogue import Catalogue, Selection
from conformance.scenario.loader import (
    CaseLoadError,
    load_cases,
    load_catalogue,
    load_file,
    shipped_catalogue,
)
from conformance.scenario.model import Case, Step

__all__ = ["Case", "CaseLoadError", "Catalogue", "Selection", "Step", "load_cases",
           "load_catalogue", "load_file", "shipped_catalogue"]
