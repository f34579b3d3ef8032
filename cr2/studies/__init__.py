"""Studies over many runs: the premise map, pool sweeps, label diagnostics, the sim-to-real check."""
