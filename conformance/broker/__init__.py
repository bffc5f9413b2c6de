"""The reference broker (see server.py for what it holds and its bounds, protocol.py for
what it answers, session.py for the I/O of one connection)."""

from conformance.broker.config import CHOICES, LIMITS, BrokerConfig
from conformance.broker.faults import FAULTS
from conformance.broker.server import Broker, embedded

__all__ = ["CHOICES", "FAULTS", "LIMITS", "Broker", "BrokerConfig", "embedded"]
