"""The reference broker (see server.py for what it holds and its bounds)."""

from conformance.broker.faults import FAULTS
from conformance.broker.server import Broker, BrokerConfig, embedded

__all__ = ["FAULTS", "Broker", "BrokerConfig", "embedded"]
