"""cr2 — cost-aware, risk-controlled device–edge LLM routing (CR²), as a pure library."""
from cr2.env import apply_offline_env

apply_offline_env()

__version__ = "0.1.0"
