"""The wire: how the harness reaches a broker and talks to it, below every room that does
(the runner, the probes, the fuzzers). A `Target` says where the broker is and with what
settings; `transport` opens the byte stream and `handshake` builds the CONNECT; a
`Connection` turns the bytes the broker sends into timestamped events (frames, heart-beats,
the close) as they arrive, and writes what the harness sends, every octet both ways going to
the `Transcript`. Data flows up from the socket as events and down from the caller as bytes;
nothing here judges what a broker did."""
