"""Deployment: the threshold table and online rule, device export, the runtime, batching and drift."""
