"""Client conformance: STOMP client libraries judged against the spec's client statements.
A scripted broker (the case's steps, on the reference broker's connect logic and outgoing
frames) faces the client, which a driver process runs (the contract in
cases/clients/README.md); `driver.py` is the reference driver, with fault switches."""

from conformance.clients.driver_process import REFERENCE_DRIVER, Driver, DriverError
from conformance.clients.engine import ClientInfo, run_client_case, run_client_cases

__all__ = ["REFERENCE_DRIVER", "ClientInfo", "Driver", "DriverError", "run_client_case",
           "run_client_cases"]
