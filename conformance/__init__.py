"""stomp-conformance: a vendor-neutral conformance suite and fuzzer for STOMP brokers."""

__version__ = "0.1.0"
