"""What every part of cr2 shares: the error hierarchy (errors), the one fingerprint function (hashing), the
small typed objects routers exchange (data), the input boundary every outside text, number and YAML passes
(boundary) and the offline switch of every entry point (env). Anything narrower lives with its concept."""
