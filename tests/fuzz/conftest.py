"""Hypothesis profiles of the fuzz suites, chosen by HYPOTHESIS_PROFILE (default `ci`).

- `ci` (what `make test` runs): derandomized and without an example database, so a run is the same every time
  and a failure always has a reason in the code, never in the machine's history; few examples, so the whole
  fuzz suite stays well under a minute on a loaded machine.
- `long` (what `make fuzz` runs): random, many examples, with an example database in .hypothesis/ (ignored by
  git) that replays earlier failures first.

Neither has a deadline: it is a wall-clock bound, and the test machines are shared.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from helpers.paths import REPO_ROOT

# Wall-clock health checks fail a test on a busy machine, not for a reason in the code.
_TIMING_CHECKS = [HealthCheck.too_slow]

settings.register_profile(
    "ci", derandomize=True, database=None, max_examples=60, deadline=None, print_blob=True,
    suppress_health_check=_TIMING_CHECKS)
settings.register_profile(
    "long", derandomize=False, database=DirectoryBasedExampleDatabase(REPO_ROOT / ".hypothesis" / "examples"),
    max_examples=4000, deadline=None, print_blob=True, suppress_health_check=_TIMING_CHECKS)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
