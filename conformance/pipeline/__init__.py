"""The data pipeline: PySpark jobs over the JSON Lines records that `run --results` and
`fuzz` write (broker x statement matrix, regressions, flaky cases, finding buckets, trends),
and the distributed fuzz campaign. Spark runs in local mode unless given a master URL.

Modules: `schemas` (the records' StructTypes), `spark` (a SparkSession that starts fast
and quietly), `load` (records in, checked), `shape` (the shape of a fuzz input), `jobs`
(one function per question), `runs` (the run table the jobs share, on the driver), `runner`
(the jobs run and written), `report_data` (what the HTML report reads) and `distributed`
(the distributed fuzz job). The `pipeline` verbs are conformance/cli/pipeline.py, which
imports Spark only when one runs."""

#: The jobs, in the order `pipeline all` runs them.
JOBS = ("matrix", "regressions", "flaky", "buckets", "trends")
