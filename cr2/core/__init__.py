"""Errors, names, hashing, the environment, input checks and the small typed objects every part shares."""
