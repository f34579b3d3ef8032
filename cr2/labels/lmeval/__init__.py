"""Labeling with lm-evaluation-harness: backends, task definitions, the MBPP sandbox, runs and estimates."""
