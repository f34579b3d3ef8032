"""cr2's MBPP metric: pass@1 of a greedy completion, judged in cr2's sandbox.

lm-eval's stock `mbpp` metric calls `evaluate.load("code_eval")` at import, which fetches a script from
the Hugging Face hub and cannot run offline; it also runs the code in a thread-pool subprocess with only
a timeout, and takes "exit status 0" as a pass, which a completion can fake. This function has the same
call shape (lm-eval calls it once per sample with `references=[target], predictions=[filtered response]`)
and asks `cr2.labels.lmeval.sandbox.check_completion`: the completion runs in an isolated worker and a
separate judge process evaluates the asserts on plain data. The target is the doc's `reference`: MBPP's
test_setup_code (which lm-eval's stock task drops; two MBPP items need it) followed by the three asserts.
"""
from __future__ import annotations

from cr2.labels.lmeval.sandbox import SandboxLimits, check_completion
from cr2.core.errors import InvalidValueError


def pass_at_1(
    references: list[str],
    predictions: list[str],
    timeout_s: float = 10.0,
    memory_mb: int = 1024,
    max_processes: int = 8,
    max_output_mb: int = 8,
    user: str | None = "nobody",
    python: str | None = None,
) -> float:
    """1.0 if the (single) prediction passes the (single) reference's tests in the sandbox, else 0.0."""
    if len(references) != 1 or len(predictions) != 1:
        raise InvalidValueError(f"pass_at_1 scores one sample at a time (got {len(references)} references, {len(predictions)} predictions)")
    prediction = predictions[0]
    if isinstance(prediction, (list, tuple)):  # lm-eval passes [resp] for repeats=1 under some filters
        prediction = prediction[0] if prediction else ""
    limits = SandboxLimits(
        timeout_s=timeout_s, memory_bytes=int(memory_mb) << 20, max_processes=max_processes,
        max_file_bytes=int(max_output_mb) << 20, user=user, python=python,
    )
    return 1.0 if check_completion(str(prediction), references[0], limits) else 0.0
