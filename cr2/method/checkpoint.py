"""Fingerprints, reproducible training contexts and checkpoint files of cr2's torch modules.

A fingerprint identifies a fitted score function: a threshold table records the fingerprint of the gate
it was calibrated for, and using it with another gate is an error. torch is imported inside the
functions, so importing this module stays cheap.
"""
from __future__ import annotations

import contextlib
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

from cr2.core.hashing import content_fingerprint
from cr2.core.files import atomic_write

PREDICT_BATCH = 8192  # rows per forward pass of a torch module at inference; bounds memory only

def fingerprint(module: Any) -> str:
    """Return the content fingerprint of a torch module's state_dict (names, dtypes, shapes, bytes; cr2.core.hashing)."""
    state = module.state_dict()
    return content_fingerprint(arrays={k: v.detach().cpu().contiguous().numpy() for k, v in state.items()})


@contextlib.contextmanager
def seeded_torch(seed: int, num_threads: int = 1) -> Iterator[Any]:
    """Yield a torch.Generator seeded with `seed` inside a reproducible, self-restoring torch context.

    Inside the block the global torch RNG is forked and seeded (parameter initialisation and dropout
    use it), the intra-op thread count is fixed and deterministic algorithms are required; all three
    are restored on exit, so library code never leaves global state behind. Same seed and same
    num_threads → bit-identical results on one machine.
    """
    import torch

    prev_threads = torch.get_num_threads()
    prev_det = torch.are_deterministic_algorithms_enabled()
    prev_warn = torch.is_deterministic_algorithms_warn_only_enabled()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        torch.set_num_threads(num_threads)
        torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            yield torch.Generator().manual_seed(seed)
        finally:
            torch.set_num_threads(prev_threads)
            torch.use_deterministic_algorithms(prev_det, warn_only=prev_warn)


def save_checkpoint(module: Any, hparams: dict[str, Any], path: str | Path, kind: str) -> str:
    """Write {kind, hparams, state_dict, fingerprint} with torch.save; return the fingerprint."""
    import torch

    fp = fingerprint(module)
    payload = {"kind": kind, "hparams": dict(hparams), "state_dict": module.state_dict(), "fingerprint": fp}
    atomic_write(path, lambda tmp: torch.save(payload, tmp))  # a failed write leaves the previous checkpoint in place
    return fp


def load_checkpoint(path: str | Path, kind: str) -> dict[str, Any]:
    """Return the checkpoint dict at `path`; raises DataValidationError when it is not a `kind` checkpoint."""
    import torch

    from cr2.core.errors import DataValidationError

    try:
        payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise DataValidationError(f"{path}: checkpoint not found; fit and save the {kind} first") from None
    if not isinstance(payload, dict) or payload.get("kind") != kind:
        found = payload.get("kind") if isinstance(payload, dict) else type(payload).__name__
        raise DataValidationError(f"{path}: expected a {kind} checkpoint, found {found!r}")
    return payload


def restore(module: Any, payload: dict[str, Any], path: str | Path) -> Any:
    """Return `module` with the checkpoint's weights, frozen in eval mode; checks the stored fingerprint."""
    from cr2.core.errors import DataValidationError

    module.load_state_dict(payload["state_dict"])
    module.eval().requires_grad_(False)
    if fingerprint(module) != payload["fingerprint"]:
        raise DataValidationError(
            f"{path}: weights do not match the stored fingerprint {payload['fingerprint']}; the file is corrupt — refit"
        )
    return module


def fit_epochs(module: Any, optimizer: Any, epochs: int, batches: Callable[[], Iterator[Any]], dev_loss: Callable[[], float],
               grad_clip: float, extra: Callable[[], dict[str, float]] | None = None, patience: int | None = None,
               dev_name: str = "dev_loss") -> Any:
    """Train `module` for `epochs` epochs and return it at the epoch of lowest dev loss, frozen in eval mode.

    The one training loop of cr2: the teacher, the gate and the learned baselines all go through it.
    With `patience`, training stops after that many epochs without a new best dev loss.

    batches(): yields one training loss tensor per mini-batch of an epoch (the caller draws the batches);
    each is back-propagated, clipped to `grad_clip` and stepped. dev_loss(): the dev-set loss after the
    epoch. The earliest epoch wins a tie. Sets module.history_ (per-epoch losses) and module.best_epoch_.
    """
    import copy
    import math

    import torch

    best_loss, best_state, best_epoch, history = math.inf, None, -1, []
    for epoch in range(epochs):
        module.train()
        train_sum, n_batches = 0.0, 0
        for loss in batches():
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), grad_clip)
            optimizer.step()
            train_sum, n_batches = train_sum + loss.item(), n_batches + 1
        dev = dev_loss()
        history.append({"epoch": epoch, "train_loss": train_sum / max(n_batches, 1), dev_name: dev, **(extra() if extra else {})})
        if dev < best_loss:  # strict: the earliest epoch wins a tie
            best_loss, best_state, best_epoch = dev, copy.deepcopy(module.state_dict()), epoch
        elif patience is not None and epoch - best_epoch >= patience:
            break
    module.load_state_dict(best_state)
    module.eval().requires_grad_(False)
    module.history_ = history
    module.best_epoch_ = best_epoch
    module.best_dev_loss_ = best_loss
    return module


_TWINS: "weakref.WeakKeyDictionary[Any, tuple[tuple, Any]]" = weakref.WeakKeyDictionary()


def float64_twin(module: Any) -> Any:
    """A float64, eval-mode copy of `module`, cached until one of its parameters or buffers changes.

    Inference runs in float64 and rounds once, so a query's output does not depend on its batch; building
    the copy costs more than a batch-1 forward pass, so it is kept and rebuilt only when a tensor's
    version counter (bumped by every in-place update: optimiser steps, load_state_dict) moves.
    """
    import copy
    import itertools

    key = tuple((id(t), t._version) for t in itertools.chain(module.parameters(), module.buffers()))
    hit = _TWINS.get(module)
    if hit is not None and hit[0] == key:
        return hit[1]
    twin = copy.deepcopy(module).double().eval()
    _TWINS[module] = (key, twin)
    return twin
