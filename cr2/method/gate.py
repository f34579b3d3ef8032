"""The on-device margin gate: a λ-conditioned (FiLM) regressor of the teacher margin (paper §VI-D, §VI-E).

The gate sees only (e(x), λ). It is trained by margin distillation from the frozen teacher: for every
mini-batch J log-uniform λ are drawn and the teacher margins Δθ(x, ξ; λ) of the batch's queries under
their own channel states are the targets. Its score s = σ(Δ̂/T) is what CRC calibrates.
"""
from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from cr2.method.checkpoint import (
    fingerprint,
    fit_epochs,
    float64_twin,
    load_checkpoint,
    restore,
    save_checkpoint,
    seeded_torch,
)
from cr2.method.complexity import count_parameters, elementwise_flops, linear_flops
from cr2.config import GateSpec
from cr2.core.data import EMBED_DIM, RoutingSet
from cr2.core.errors import ConfigError, DataValidationError, InvalidValueError
from cr2.method.dropout import MaskStream, ReplayDropout, mask_stream
from cr2.method.dropout import Store as MaskStore
from cr2.method.utility import sign_label, teacher_margin

TEMPERATURE_FLOOR = 1e-6
CHUNK_ELEMENTS = 1 << 22  # bound on rows × λ × hidden per forward pass outside training (memory only)
DEV_LAMBDAS = 16  # fixed log-spaced λ grid on which the dev loss is measured (checkpoint selection)


def _rows_per_chunk(n_lam: int, hidden: int) -> int:
    """Return how many queries one no-grad forward pass takes so that its [L, b, H] block stays small."""
    return max(1, CHUNK_ELEMENTS // max(1, n_lam * hidden))


def _inverse_softplus(y: float) -> float:
    """Return η with softplus(η) = y (y > 0)."""
    return y + math.log(-math.expm1(-y))


class MarginGate(nn.Module):
    """FiLM gate Δ̂_φ(e, λ) = W2·Drop(GELU(γ(λ)⊙W1·LN(e) + β(λ))) + b2 with learnable temperature T.

    forward(embedding [B, d], lam [L]) returns the predicted margins Δ̂, [L, B]. [cr2 decision] the γ half
    of W_film's bias starts at 1 (so h̃ ≈ h at initialisation); the paper leaves FiLM initialisation open.
    """

    def __init__(
        self,
        embed_dim: int = EMBED_DIM,
        hidden: int = 256,
        film_frequencies: Sequence[float] = (0.5, 1.0, 2.0, 4.0),
        dropout: float = 0.1,
        temperature_init: float = 0.1,
    ) -> None:
        super().__init__()
        if temperature_init <= TEMPERATURE_FLOOR:
            raise ConfigError(f"gate.temperature_init must exceed {TEMPERATURE_FLOOR} (got {temperature_init})")
        freqs = [float(f) for f in film_frequencies]
        self.hparams = {
            "embed_dim": int(embed_dim),
            "hidden": int(hidden),
            "film_frequencies": freqs,
            "dropout": float(dropout),
            "temperature_init": float(temperature_init),
        }
        self.hidden = int(hidden)
        self.n_psi = 1 + 2 * len(freqs)
        # a buffer, not a parameter: it is part of the state_dict (and so of the fingerprint), not of n_params
        self.register_buffer("film_frequencies", torch.tensor(freqs, dtype=torch.float64))
        self.norm = nn.LayerNorm(embed_dim)
        self.w1 = nn.Linear(embed_dim, hidden)
        self.film = nn.Linear(self.n_psi, 2 * hidden)
        self.drop = ReplayDropout(dropout)  # nn.Dropout whose masks a fit may replay (cr2.method.dropout)
        self.w2 = nn.Linear(hidden, 1)
        # eq. (temperature): T = softplus(η_T) + 1e-6, η_T chosen so that T starts at temperature_init
        self.eta = nn.Parameter(torch.tensor(_inverse_softplus(temperature_init - TEMPERATURE_FLOOR), dtype=torch.float32))
        with torch.no_grad():
            self.film.bias[:hidden].add_(1.0)

    # ------------------------------------------------------------ the function
    def psi(self, lam: torch.Tensor) -> torch.Tensor:
        """Return ψ_λ = [log λ, sin(2π f_k log λ), cos(2π f_k log λ) …], [L, 1 + 2K] in the weights' dtype."""
        log_lam = torch.log(lam.to(torch.float64))[:, None]
        angle = 2.0 * math.pi * self.film_frequencies[None, :] * log_lam
        # eq. (psi_lambda): ψ_λ = [log λ, {sin(2π f_k log λ), cos(2π f_k log λ)}_{k=1..K}]
        trig = torch.stack([torch.sin(angle), torch.cos(angle)], dim=-1).reshape(len(lam), -1)
        return torch.cat([log_lam, trig], dim=1).to(self.w1.weight.dtype)

    @property
    def temperature(self) -> torch.Tensor:
        """Return T = softplus(η_T) + 1e-6 (a scalar tensor)."""
        # eq. (temperature): T = softplus(η_T) + 10⁻⁶
        return F.softplus(self.eta) + TEMPERATURE_FLOOR

    def forward(self, embedding: torch.Tensor, lam: torch.Tensor) -> torch.Tensor:
        """Return the predicted margins Δ̂_φ(e, λ), [L, B]."""
        h = self.w1(self.norm(embedding))  # h = W1 LN(e), [B, H]
        film = self.film(self.psi(lam))  # (γ, β) = W_film ψ_λ, [L, 2H]
        gamma, beta = film[:, : self.hidden], film[:, self.hidden :]
        h_tilde = gamma[:, None, :] * h[None, :, :] + beta[:, None, :]  # h̃ = γ ⊙ h + β, [L, B, H]
        # eq. (film_gate): Δ̂ = W2 Drop(GELU(h̃)) + b2
        return self.w2(self.drop(F.gelu(h_tilde))).squeeze(-1)

    # ------------------------------------------------------------ inference (numpy in, numpy out)
    @torch.no_grad()
    def _predict(self, embedding: np.ndarray, lam: float | np.ndarray, as_score: bool) -> np.ndarray:
        lam_arr = np.asarray(lam, dtype=np.float64)
        if lam_arr.ndim > 1 or np.any(~(lam_arr > 0)) or np.any(~np.isfinite(lam_arr)):
            raise InvalidValueError(f"λ must be a positive finite scalar or 1-D vector, got {lam!r}")
        arr = np.asarray(embedding, dtype=np.float32)
        if arr.ndim != 2 or arr.shape[1] != self.hparams["embed_dim"]:
            raise InvalidValueError(f"embedding has shape {arr.shape}, expected [n, {self.hparams['embed_dim']}]")
        # Evaluated in float64, then rounded once to float32: a float32 forward pass gives last-bit
        # differences with the batch shape (how many queries, how many λ), and CRC compares scores
        # exactly, so a query must get the same float32 score at calibration and at routing time.
        twin = float64_twin(self)
        x = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
        lam_t = torch.from_numpy(np.atleast_1d(lam_arr))
        temperature = twin.temperature
        chunks, step = [], _rows_per_chunk(len(lam_t), self.hidden)
        for i in range(0, len(x), step):
            margin = twin(x[i : i + step], lam_t)  # [L, b]
            # eq. (gate_score): s = σ(Δ̂ / T)
            chunks.append(torch.sigmoid(margin / temperature) if as_score else margin)
        out = torch.cat(chunks, dim=1) if chunks else torch.zeros((len(lam_t), 0), dtype=torch.float64)
        out = out.T.numpy().astype(np.float32)  # [n, L]
        return out[:, 0] if lam_arr.ndim == 0 else out

    def score(self, embedding: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
        """Return the gate scores s = σ(Δ̂/T) as float32: [n] for a scalar λ, [n, n_lam] for a λ vector.

        A query's score depends only on (e(x), λ), not on the batch it came in (see _predict).
        """
        return self._predict(embedding, lam, as_score=True)

    def margin(self, embedding: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
        """Return the predicted margins Δ̂ as float32: [n] for a scalar λ, [n, n_lam] for a λ vector."""
        return self._predict(embedding, lam, as_score=False)

    # ------------------------------------------------------------ complexity
    def n_params(self) -> int:
        """Return the number of trainable parameters (104,706 for d = 384, H = 256, K = 4)."""
        return count_parameters(self)

    def flops_per_query(self) -> int:
        """Return the FLOPs of one query at one λ (cr2.method.complexity convention; 207,104 for the paper's gate)."""
        d, h = self.hparams["embed_dim"], self.hidden
        return (
            linear_flops(d, h)  # W1
            + linear_flops(self.n_psi, 2 * h)  # W_film
            + elementwise_flops(h, ops=2)  # γ ⊙ h + β
            + elementwise_flops(h)  # GELU
            + linear_flops(h, 1)  # W2
        )


def gate_loss(
    margin_pred: torch.Tensor,
    margin_teacher: torch.Tensor,
    z: torch.Tensor,
    lam: torch.Tensor,
    temperature: torch.Tensor,
    spec: GateSpec,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Return (L, parts): the margin-distillation loss of one mini-batch, rows of [J, B] inputs indexed by λ_j."""
    parts = _gate_loss_sums(margin_pred, margin_teacher, z, lam, temperature, spec)
    n, n_mono = margin_pred.numel(), max(margin_pred.shape[0] - 1, 0) * margin_pred.shape[1]
    sign, reg = parts["sign"] / n, parts["margin"] / n
    mono = parts["mono"] / n_mono if n_mono else parts["mono"] * 0.0
    # eq. (loss_total): L = w_sign L_sign + w_margin L_margin + w_mono L_mono
    loss = spec.w_sign * sign + spec.w_margin * reg + spec.w_mono * mono
    return loss, {"sign": sign.item(), "margin": reg.item(), "mono": mono.item()}


def _gate_loss_sums(
    margin_pred: torch.Tensor,
    margin_teacher: torch.Tensor,
    z: torch.Tensor,
    lam: torch.Tensor,
    temperature: torch.Tensor,
    spec: GateSpec,
) -> dict[str, torch.Tensor]:
    """Return the un-normalised sums of the sign, margin and monotone terms over a [J, B] block."""
    # eq. (loss_bce): L_sign = 1/(J B) Σ_{j,i} ℓ_BCE(Δ̂_{j,i} / T, z_{j,i})
    sign = F.binary_cross_entropy_with_logits(margin_pred / temperature, z, reduction="sum")
    # eq. (loss_reg): L_margin = 1/(J B) Σ_{j,i} Huber_β(Δ̂_{j,i} − sg(Δθ_{j,i}))
    reg = F.huber_loss(margin_pred, margin_teacher.detach(), reduction="sum", delta=spec.huber_beta)
    # eq. (loss_mono): L_mono = 1/((J−1) B) Σ_j Σ_i (Δ̃_{j,i} − Δ̃_{j+1,i})₊ over λ sorted ascending,
    # i.e. a predicted margin that decreases as λ grows is penalised (Δθ is non-decreasing in λ)
    ordered = margin_pred[torch.argsort(lam)]
    mono = F.relu(ordered[:-1] - ordered[1:]).sum()
    return {"sign": sign, "margin": reg, "mono": mono}


def _targets(proba: np.ndarray, cost: np.ndarray, lam: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (Δθ, z) as float32 [J, B] tensors; z is decided on the float64 margin."""
    margin = teacher_margin(proba, cost, lam).T  # [J, B]
    z = sign_label(margin)
    return torch.from_numpy(margin.astype(np.float32)), torch.from_numpy(z.astype(np.float32))


@torch.no_grad()
def _dev_loss(gate: MarginGate, x: torch.Tensor, proba: np.ndarray, cost: np.ndarray, lam: np.ndarray, spec: GateSpec) -> float:
    """Return the gate loss on a whole set at a fixed λ grid (eval mode: no dropout)."""
    gate.eval()
    lam_t = torch.from_numpy(lam)
    sums = {"sign": 0.0, "margin": 0.0, "mono": 0.0}
    temperature = gate.temperature
    step = _rows_per_chunk(len(lam), gate.hidden)
    for i in range(0, len(x), step):
        margin_teacher, z = _targets(proba[i : i + step], cost[i : i + step], lam)
        part = _gate_loss_sums(gate(x[i : i + step], lam_t), margin_teacher, z, lam_t, temperature, spec)
        for k in sums:
            sums[k] += float(part[k])
    n, n_mono = len(lam) * len(x), (len(lam) - 1) * len(x)
    mono = sums["mono"] / n_mono if n_mono else 0.0
    return spec.w_sign * sums["sign"] / n + spec.w_margin * sums["margin"] / n + spec.w_mono * mono


def _check_proba(name: str, proba: np.ndarray, data: RoutingSet) -> np.ndarray:
    proba = np.asarray(proba, dtype=np.float64)
    if proba.shape != data.cost.shape:
        raise DataValidationError(f"{name} has shape {proba.shape}, expected {data.cost.shape} (queries × models)")
    return proba


def fit_gate(
    train: RoutingSet,
    dev: RoutingSet,
    teacher_proba_train: np.ndarray,
    teacher_proba_dev: np.ndarray,
    spec: GateSpec,
    *,
    num_threads: int = 1,
    init: MarginGate | None = None,
    dropout_cache: MaskStore | None = None,
) -> MarginGate:
    """Return the margin gate fitted by margin distillation, at the epoch of lowest dev loss, frozen in eval mode.

    init: a fitted gate of the same shape to start from (re-distillation on new costs, e.g. the premise map's
    retrained cells); None: a fresh gate initialised from spec.seed.
    dropout_cache: a store (tasks/store.py) where the fit's dropout masks are kept once and replayed by every fit
    with the same seed and shapes (gate_mask_stream); the same gate, bit for bit, as without it.

    teacher_proba_*: the frozen teacher's p_m(x) on train/dev, [n, n_models]. Each mini-batch draws
    J = spec.lambdas_per_batch λ log-uniformly in [lam_min, lam_max]; the dev loss is measured on a fixed
    log-spaced grid of DEV_LAMBDAS λ. Deterministic: same data, spec.seed and num_threads → bit-identical
    parameters. Attributes set: history_, best_epoch_.
    """
    if spec.lam_max <= spec.lam_min:
        raise ConfigError(f"gate.lam_max ({spec.lam_max}) must exceed gate.lam_min ({spec.lam_min})")
    if len(train) == 0 or len(dev) == 0:
        raise DataValidationError(f"fit_gate needs non-empty train and dev sets (got {len(train)} and {len(dev)} rows)")
    p_train = _check_proba("teacher_proba_train", teacher_proba_train, train)
    p_dev = _check_proba("teacher_proba_dev", teacher_proba_dev, dev)
    c_train = np.asarray(train.decision_cost, dtype=np.float64)
    c_dev = np.asarray(dev.decision_cost, dtype=np.float64)
    embed_dim = train.embedding.shape[1]
    x_train = torch.from_numpy(np.ascontiguousarray(train.embedding, dtype=np.float32))
    x_dev = torch.from_numpy(np.ascontiguousarray(dev.embedding, dtype=np.float32))
    dev_lams = np.geomspace(spec.lam_min, spec.lam_max, DEV_LAMBDAS)
    log_lo, log_hi = math.log(spec.lam_min), math.log(spec.lam_max)

    with seeded_torch(spec.seed, num_threads) as gen:
        gate = MarginGate(embed_dim, spec.hidden, spec.film_frequencies, spec.dropout, spec.temperature_init)
        if init is not None:
            if init.hparams != gate.hparams:
                raise ConfigError(f"cannot start the gate from one with other hyperparameters: {init.hparams} vs {gate.hparams}")
            gate.load_state_dict(init.state_dict())
        opt = torch.optim.AdamW(gate.parameters(), lr=spec.lr, weight_decay=spec.weight_decay)
        # from here the process' generator draws nothing but dropout masks: a stored stream replays them
        replay = (gate.drop.replaying(_mask_stream(dropout_cache, spec, len(train)))
                  if dropout_cache is not None and spec.dropout > 0 else contextlib.nullcontext())

        def batches():
            perm = torch.randperm(len(x_train), generator=gen).numpy()
            for start in range(0, len(perm), spec.batch_size):
                idx = perm[start : start + spec.batch_size]
                # log λ_j ~ U(log lam_min, log lam_max), j = 1..J
                u = torch.rand(spec.lambdas_per_batch, generator=gen, dtype=torch.float64).numpy()
                lam = np.exp(log_lo + (log_hi - log_lo) * u)
                margin_teacher, z = _targets(p_train[idx], c_train[idx], lam)
                lam_t = torch.from_numpy(lam)
                yield gate_loss(gate(x_train[idx], lam_t), margin_teacher, z, lam_t, gate.temperature, spec)[0]

        with replay:
            fit_epochs(gate, opt, spec.epochs, batches, lambda: _dev_loss(gate, x_dev, p_dev, c_dev, dev_lams, spec),
                       spec.grad_clip, extra=lambda: {"temperature": gate.temperature.item()})
    return gate


def _mask_stream(store: MaskStore, spec: GateSpec, n_train: int) -> MaskStream:
    """The dropout draws of a gate fit of `spec` on n_train rows, from the generator's current state: J λ × every
    train row × the hidden width, per epoch (every epoch runs: the best one is chosen after)."""
    n = spec.epochs * spec.lambdas_per_batch * n_train * spec.hidden
    return mask_stream(store, torch.get_rng_state(), 1.0 - spec.dropout, n)


def gate_mask_stream(store: MaskStore, spec: GateSpec, embed_dim: int, n_train: int, num_threads: int = 1) -> None:
    """Draw and store the dropout masks fit_gate(…, dropout_cache=store) will replay, before several fits start at
    once (so that one process draws them, not each); nothing when stored already."""
    if spec.dropout > 0:
        with seeded_torch(spec.seed, num_threads):
            MarginGate(embed_dim, spec.hidden, spec.film_frequencies, spec.dropout, spec.temperature_init)
            _mask_stream(store, spec, n_train)


def save_gate(gate: MarginGate, path: str | Path) -> str:
    """Write the gate's state_dict and hyperparameters to `path`; return its fingerprint."""
    return save_checkpoint(gate, gate.hparams, path, kind="gate")


def load_gate(path: str | Path) -> MarginGate:
    """Return the frozen gate stored at `path` (its fingerprint is verified)."""
    payload: dict[str, Any] = load_checkpoint(path, kind="gate")
    return restore(MarginGate(**payload["hparams"]), payload, path)


__all__ = ["MarginGate", "fingerprint", "fit_gate", "gate_loss", "load_gate", "save_gate"]
