import os

from hypothesis import HealthCheck, settings

# CI machines are slow and shared: no per-example deadline, more examples than locally.
settings.register_profile("ci", deadline=None, max_examples=300,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=100)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
