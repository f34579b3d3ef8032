"""cr2 — cost-aware, risk-controlled device–edge LLM routing (CR²), as a pure library.

Importing it changes nothing outside it: the offline / no-telemetry environment (cr2/core/env.py) is set by the entry
points — the `cr2` command, the flows/, tasks/ and warehouse/ packages, the benchmarks and the tests.
"""

__version__ = "0.1.0"
