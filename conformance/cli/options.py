"""What several verbs read from their flags alike: the TLS options of a broker address."""

from __future__ import annotations

import argparse

from conformance.wire.transport import BrokerAddress, TlsOptions


def tls_options(args: argparse.Namespace, address: BrokerAddress | None) -> TlsOptions | None:
    """TLS settings from --tls-* for a stomp+ssl:// address or when any --tls flag is given;
    None for a plain connection."""
    if (address and address.tls) or args.tls_ca or args.tls_cert or args.tls_no_verify:
        return TlsOptions(ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key,
                          verify=not args.tls_no_verify)
    return None
