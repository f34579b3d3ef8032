"""The wireless device–edge system of the paper's §IV: channel states and rates, latency, energy, cost."""
