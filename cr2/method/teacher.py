"""The teacher selector f_θ: one binary correctness head per model over the frozen embedding (paper §VI-B).

The teacher is fitted once on the train split (checkpoint chosen on the dev slice), then frozen; its
p_m(x) define the teacher utilities û_m = p_m − λ c_m that supervise the gate and drive the deferred
(edge) choice.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from cr2.method.checkpoint import (
    PREDICT_BATCH,
    fingerprint,
    fit_epochs,
    float64_twin,
    load_checkpoint,
    restore,
    save_checkpoint,
    seeded_torch,
)
from cr2.method.complexity import count_parameters, elementwise_flops, linear_flops
from cr2.config import TeacherSpec
from cr2.core.data import EMBED_DIM, RoutingSet
from cr2.core.errors import DataValidationError, InvalidValueError



class TeacherSelector(nn.Module):
    """Per-model correctness heads LayerNorm(d) → Linear(d, H) → GELU → Linear(H, 1); forward returns logits ℓ_m(x)."""

    def __init__(self, n_models: int, embed_dim: int = EMBED_DIM, hidden: int = 256) -> None:
        super().__init__()
        self.hparams = {"n_models": int(n_models), "embed_dim": int(embed_dim), "hidden": int(hidden)}
        self.heads = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(embed_dim), nn.Linear(embed_dim, hidden), nn.GELU(), nn.Linear(hidden, 1))
            for _ in range(n_models)
        )

    def forward(self, embedding: torch.Tensor) -> torch.Tensor:
        """Return the logits ℓ_m(x), [B, n_models]."""
        return torch.cat([head(embedding) for head in self.heads], dim=1)

    @torch.no_grad()
    def predict_proba(self, embedding: np.ndarray) -> np.ndarray:
        """Return p_m(x) = σ(ℓ_m(x)) as float32 [n, n_models] (eval mode, batched).

        Evaluated in float64 and rounded once, so a query's p_m(x) does not depend on its batch.
        """
        x = _as_embedding(embedding, self.hparams["embed_dim"]).double()
        twin = float64_twin(self)
        out = [torch.sigmoid(twin(x[i : i + PREDICT_BATCH])) for i in range(0, len(x), PREDICT_BATCH)]
        if not out:
            return np.zeros((0, self.hparams["n_models"]), dtype=np.float32)
        return torch.cat(out).numpy().astype(np.float32)

    def n_params(self) -> int:
        """Return the number of trainable parameters (398,340 for 4 models, d = 384, H = 256)."""
        return count_parameters(self)

    def flops_per_query(self) -> int:
        """Return the FLOPs of one query (cr2.method.complexity convention; 789,504 for 4 models)."""
        d, h = self.hparams["embed_dim"], self.hparams["hidden"]
        per_head = linear_flops(d, h) + elementwise_flops(h) + linear_flops(h, 1)
        return self.hparams["n_models"] * per_head


def _as_embedding(embedding: np.ndarray, embed_dim: int) -> torch.Tensor:
    arr = np.asarray(embedding, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] != embed_dim:
        raise InvalidValueError(f"embedding has shape {arr.shape}, expected [n, {embed_dim}]")
    return torch.from_numpy(np.ascontiguousarray(arr))


def _loss_parts(logits: torch.Tensor, correct: torch.Tensor) -> tuple[torch.Tensor, int, torch.Tensor, int]:
    """Return (Σ BCE, #terms, Σ per-query ranking loss, |B'|) so that batch losses combine exactly."""
    # eq. (teacher_bce_loss): L_BCE = 1/(|B||M|) Σ_i Σ_m ℓ_BCE(ℓ_m(x_i), y_m(x_i))
    bce_sum = F.binary_cross_entropy_with_logits(logits, correct, reduction="sum")
    pos = correct > 0.5
    # pair[i, a, b] = 1 for a ∈ P_i⁺ (correct), b ∈ P_i⁻ (incorrect): P_i = P_i⁺ × P_i⁻
    pair = (pos[:, :, None] & ~pos[:, None, :]).to(logits.dtype)
    n_pairs = pair.sum(dim=(1, 2))
    # eq. (teacher_rank_per_query): ℓ_i^rank = 1/|P_i| Σ_{(m⁺, m⁻) ∈ P_i} softplus(ℓ_{m⁻} − ℓ_{m⁺})
    gap = logits[:, None, :] - logits[:, :, None]  # gap[i, a, b] = ℓ_b − ℓ_a
    per_pair = F.softplus(gap) * pair
    has_pairs = n_pairs > 0  # B' skips all-correct and all-wrong queries
    per_query = per_pair.sum(dim=(1, 2))[has_pairs] / n_pairs[has_pairs]
    return bce_sum, logits.numel(), per_query.sum(), int(has_pairs.sum())


def teacher_loss(logits: torch.Tensor, correct: torch.Tensor, w_cls: float = 1.0, w_rank: float = 1.0) -> torch.Tensor:
    """Return L_teacher = w_cls·L_BCE + w_rank·L_rank for one mini-batch (L_rank = 0 when B' is empty)."""
    bce_sum, n_bce, rank_sum, n_rank = _loss_parts(logits, correct)
    # eq. (teacher_rank_loss): L_rank = 1/|B'| Σ_{i ∈ B'} ℓ_i^rank
    rank = rank_sum / n_rank if n_rank > 0 else rank_sum * 0.0
    # eq. (teacher_loss): L_teacher = w_cls L_BCE + w_rank L_rank
    return w_cls * bce_sum / n_bce + w_rank * rank


@torch.no_grad()
def _dataset_loss(model: TeacherSelector, x: torch.Tensor, y: torch.Tensor, spec: TeacherSpec) -> float:
    """Return the teacher loss over a whole set (the BCE and ranking means taken over all its rows)."""
    model.eval()
    parts = [_loss_parts(model(x[i : i + PREDICT_BATCH]), y[i : i + PREDICT_BATCH]) for i in range(0, len(x), PREDICT_BATCH)]
    bce = sum(float(p[0]) for p in parts) / sum(p[1] for p in parts)
    n_rank = sum(p[3] for p in parts)
    rank = sum(float(p[2]) for p in parts) / n_rank if n_rank else 0.0
    return spec.w_cls * bce + spec.w_rank * rank


def fit_teacher(train: RoutingSet, dev: RoutingSet, spec: TeacherSpec, *, num_threads: int = 1) -> TeacherSelector:
    """Return the teacher fitted on `train` with AdamW, at the epoch of lowest dev loss, frozen in eval mode.

    Deterministic: the same data, spec.seed and num_threads give bit-identical parameters; global torch
    state (RNG, threads) is restored afterwards. Attributes set: history_ (per-epoch losses), best_epoch_.
    """
    if len(train) == 0 or len(dev) == 0:
        raise DataValidationError(f"fit_teacher needs non-empty train and dev sets (got {len(train)} and {len(dev)} rows)")
    if train.model_ids != dev.model_ids:
        raise DataValidationError(f"train and dev pools differ: {train.model_ids} vs {dev.model_ids}")
    embed_dim = train.embedding.shape[1]
    x_train = _as_embedding(train.embedding, embed_dim)
    y_train = torch.from_numpy(np.asarray(train.correct, dtype=np.float32))
    x_dev = _as_embedding(dev.embedding, embed_dim)
    y_dev = torch.from_numpy(np.asarray(dev.correct, dtype=np.float32))

    with seeded_torch(spec.seed, num_threads) as gen:
        model = TeacherSelector(train.n_models, embed_dim, spec.hidden)
        opt = torch.optim.AdamW(model.parameters(), lr=spec.lr, weight_decay=spec.weight_decay)

        def batches():
            perm = torch.randperm(len(x_train), generator=gen)
            for start in range(0, len(perm), spec.batch_size):
                idx = perm[start : start + spec.batch_size]
                yield teacher_loss(model(x_train[idx]), y_train[idx], spec.w_cls, spec.w_rank)

        fit_epochs(model, opt, spec.epochs, batches, lambda: _dataset_loss(model, x_dev, y_dev, spec), spec.grad_clip)
    return model


def save_teacher(teacher: TeacherSelector, path: str | Path) -> str:
    """Write the teacher's state_dict and hyperparameters to `path`; return its fingerprint."""
    return save_checkpoint(teacher, teacher.hparams, path, kind="teacher")


def load_teacher(path: str | Path) -> TeacherSelector:
    """Return the frozen teacher stored at `path` (its fingerprint is verified)."""
    payload: dict[str, Any] = load_checkpoint(path, kind="teacher")
    return restore(TeacherSelector(**payload["hparams"]), payload, path)


__all__ = ["TeacherSelector", "fingerprint", "fit_teacher", "load_teacher", "save_teacher", "teacher_loss"]
