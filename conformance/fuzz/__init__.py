"""Fuzzing, in four subpackages by job (each imports only those before it here):

- parsing/: the codec fuzzed alone: targets for the atheris harnesses in fuzz/ (targets.py),
  and the differential comparison of our parser with other Python STOMP parsers
  (differential.py, peers.py, draw.py);
- inputs/: what the network fuzzer sends, judged without a broker: one input (fuzz_input.py),
  valid sessions and inputs that each break one named rule (choices.py, wellformed.py,
  mutations.py; strategies.py wraps them for Hypothesis), whether an input is what it says
  (rules.py), and the MESSAGEs it must get, from the session model (expected.py);
- network/: `stomp-conformance fuzz` and `replay`: the oracle that sends one input and
  judges the answer, and the liveness check (oracle.py); what a campaign draws from
  (generators.py); the campaign loop (campaign.py, its settings and events in events.py),
  findings saved as found, minimised and written as YAML cases and pipeline records
  (findings.py, minimise.py, reproducer.py, finding_records.py), the campaign's folder a
  resume starts from (folder.py); what the command line shows (display.py) and replays
  (replay.py);
- stateful/: the stateful fuzzer: a Hypothesis state machine of sessions on two connections
  checked against the delivery model of conformance/spec/session.py (machine.py for the
  rules, checking.py for the wire and the case, harness.py for what a run shares), and
  running it (explore.py).
"""
