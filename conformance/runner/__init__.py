"""The runner: runs the YAML cases against a broker and grades them. The `Engine` (engine)
takes the cases, makes a `CaseRun` (case_run) per case and version, and runs its steps
(steps/, one interpreter per step kind) over the wire's connections; every frame a step
receives goes to the judge (judge), which grades the broken statements it finds. Each case
ends as a `CaseResult` (results), and the engine tells its handlers how the run goes as
events (events): data flows down from the engine to the steps and the wire, and results
flow back up as events to whoever listens (the CLI, the reports, the pytest plugin)."""
