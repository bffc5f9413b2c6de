"""The reference broker (see server.py for what it holds and its bounds)."""

from conformance.broker.faults import FAULTS
from conformance.broker.server import CHOICES, LIMITS, Broker, BrokerConfig, embedded

__all__ = ["CHOICES", "FAULTS", "LIMITS", "Broker", "BrokerConfig", "embedded"]
