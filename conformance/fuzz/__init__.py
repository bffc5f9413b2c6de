"""Fuzzing: targets for the codec (driven by the atheris harnesses in fuzz/) and the
differential comparison of our parser with other Python STOMP parsers; and the network
fuzzer (`stomp-conformance fuzz`, `replay`).

The network fuzzer, in the order data flows:
- choices.py, wellformed.py, mutations.py: inputs built from the grammar data, valid ones
  and ones that each break one named rule; strategies.py wraps them for Hypothesis;
- rules.py, expected.py: what an input is (still breaks its rule, still valid) and what it
  makes a broker send back, judged without a broker;
- oracle.py: one input on a fresh connection, judged; the liveness probe;
- generators.py: what a campaign draws from (pluggable);
- campaign.py, minimise.py, findings.py, reproducer.py, store.py: the campaign loop,
  findings saved as found, minimised and written as YAML cases, state kept for a resume;
- display.py, replay.py, command.py: what the command line shows and runs.
"""
