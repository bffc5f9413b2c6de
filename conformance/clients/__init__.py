"""Client conformance: STOMP client libraries judged against the spec's client statements.
A scripted broker (the case's steps, on the reference broker's connect logic and outgoing
frames) faces the client, which a driver process runs (the contract in
cases/clients/README.md); `driver.py` is the reference driver, with fault switches.

The names below are imported when first used, so that the reference driver, a module of
this package started once per case run, loads the codec and not the engine."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from conformance.clients.driver_process import REFERENCE_DRIVER, Driver, DriverError
    from conformance.clients.engine import ClientInfo, run_client_case, run_client_cases

_HOMES = {"REFERENCE_DRIVER": "driver_process", "Driver": "driver_process",
          "DriverError": "driver_process", "ClientInfo": "engine",
          "run_client_case": "engine", "run_client_cases": "engine"}

__all__ = ["REFERENCE_DRIVER", "ClientInfo", "Driver", "DriverError", "run_client_case",
           "run_client_cases"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"conformance.clients.{_HOMES[name]}"), name)
