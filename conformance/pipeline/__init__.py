"""The data pipeline: PySpark jobs over the JSON Lines records that `run --results` and
`fuzz` write (broker x statement matrix, regressions, flaky cases, finding buckets, trends),
and the distributed fuzz campaign. Spark runs in local mode unless given a master URL.

Modules: `schemas` (the records' StructTypes), `session` (a SparkSession that starts fast
and quietly), `load` (records in, checked), `shape` (the shape of a fuzz input),
`jobs` (one function per question), `runner` (the jobs run and written), `report_data`
(what the HTML report reads), `campaign` (the distributed fuzz job) and `cli` (the
`pipeline` verbs; it imports Spark only when one runs)."""

#: The jobs, in the order `pipeline all` runs them.
JOBS = ("matrix", "regressions", "flaky", "buckets", "trends")
