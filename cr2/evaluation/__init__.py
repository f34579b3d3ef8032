"""Evaluating routers: the sweep, metrics, statistics (bootstrap, Holm, the one verdict), intervals, fixed-accuracy savings, guarantees."""
