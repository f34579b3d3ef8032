"""The gate's decision at one fixed λ as a fused NumPy computation: no torch, a handful of array calls per query.

At a fixed cost weight λ the FiLM modulation (γ, β) = W_film ψ_λ is a constant, and every affine step of the
gate folds into one matrix. With LN(e) = (e − μ)/σ ⊙ g + b (σ = √(var + ε)) and h̃ = γ ⊙ (W1 LN(e) + b1) + β:

    h̃ = (e · A_c) / σ + c,   A = diag(g) W1ᵀ diag(γ),   A_c = A − 1·colsum(A)/d   (centring folded in),
                             c = γ ⊙ (W1 b + b1) + β

and s = σ(Δ̂/T) with Δ̂ = W2 GELU(h̃) + b2. The 1/√2 of GELU's erf, its ½ and 1/T are folded into A_c, c, W2
and b2, and A gets one extra column 1/d that yields the mean μ, so a decision is: one [d] × [d, H + 1]
product, one dot product e·e (for σ), a few in-place [H] operations with erf, one dot product and a scalar
sigmoid (cr2.method.gate.MarginGate computes the same function; the folding only reassociates sums).

dtype float64 (default) agrees with MarginGate.score to float64 rounding (≈ 1e-15 on the margin; the float32
score may differ in its last bit when the margin sits on a float32 rounding boundary); float32 halves the
memory traffic of the matrix product and agrees to ≈ 1e-6. Either way the score is compared with τ*(λ; α)
as cr2.crc.accept does: accept locally iff s ≥ τ*. tests/test_fused_gate.py checks both against the torch gate.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cr2.core.errors import DataValidationError

try:  # scipy's erf is a compiled ufunc (float32 and float64); without scipy a vectorised math.erf is used
    from scipy.special import erf as _erf
except ImportError:  # pragma: no cover - scipy is a dependency of cr2, not necessarily of a device
    _erf = np.vectorize(math.erf, otypes=[np.float64])

SQRT2 = math.sqrt(2.0)


@dataclass(frozen=True)
class FusedGate:
    """s(e) = σ(Δ̂_φ(e, λ)/T) at one fixed λ, as folded NumPy arrays (see the module docstring)."""

    lam: float
    a: np.ndarray  # [d, H + 1] A_c / √2, then a last column of 1/d (so e · a gives μ as its last entry)
    c: np.ndarray  # [H] c / √2
    w2: np.ndarray  # [H] W2 · √2 · ½ / T   (so Δ̂/T = (u + u·erf(u)) · w2 + b2 with u = h̃/√2)
    b2: float  # b2 / T
    eps: float  # LayerNorm ε
    dtype: Any

    @property
    def embed_dim(self) -> int:
        return int(self.a.shape[0])

    @property
    def hidden(self) -> int:
        return int(self.a.shape[1] - 1)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], film_frequencies: np.ndarray | None, temperature: float,
                    lam: float, eps: float = 1e-5, dtype: Any = np.float64,
                    two_pi_frequencies: np.ndarray | None = None) -> "FusedGate":
        """Fold a MarginGate's parameters (state_dict names, as numpy arrays) at λ into a FusedGate.

        two_pi_frequencies: 2π·f_k as stored in the exported graph (instead of film_frequencies): the angle
        2π f_k log λ is then the same float64 product the ONNX gate computes.
        """
        lam = float(lam)
        if not (lam > 0 and math.isfinite(lam)):
            raise DataValidationError(f"λ must be positive and finite, got {lam!r}")
        f = {k: np.asarray(v, dtype=np.float64) for k, v in arrays.items()}
        hidden = f["w1.weight"].shape[0]
        log_lam = math.log(lam)
        if two_pi_frequencies is not None:
            angle = np.asarray(two_pi_frequencies, dtype=np.float64) * log_lam
        else:
            angle = 2.0 * math.pi * np.asarray(film_frequencies, dtype=np.float64) * log_lam
        psi = np.concatenate([[log_lam], np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(-1)])
        film = f["film.weight"] @ psi + f["film.bias"]  # (γ, β) = W_film ψ_λ
        gamma, beta = film[:hidden], film[hidden:]
        w1t = f["w1.weight"].T  # [d, H]
        a = f["norm.weight"][:, None] * w1t * gamma[None, :]
        a_c = a - a.sum(axis=0, keepdims=True) / a.shape[0]
        c = gamma * (f["norm.bias"] @ w1t + f["w1.bias"]) + beta
        t = float(temperature)
        a_aug = np.concatenate([a_c / SQRT2, np.full((a.shape[0], 1), 1.0 / a.shape[0])], axis=1)
        return cls(lam=lam, a=np.ascontiguousarray(a_aug, dtype=dtype), c=np.asarray(c / SQRT2, dtype=dtype),
                   w2=np.asarray(f["w2.weight"][0] * (SQRT2 * 0.5 / t), dtype=dtype), b2=float(f["w2.bias"][0]) / t,
                   eps=float(eps), dtype=np.dtype(dtype))

    @classmethod
    def from_gate(cls, gate: Any, lam: float, dtype: Any = np.float64) -> "FusedGate":
        """Fold a cr2.method.gate.MarginGate (torch) at λ (the only function here that needs torch)."""
        import torch

        from cr2.method.checkpoint import float64_twin

        twin = float64_twin(gate)  # what MarginGate.score evaluates: T = softplus(η_T) + 1e-6 in float64 too
        with torch.no_grad():
            arrays = {k: v.detach().to(torch.float64).numpy().copy() for k, v in twin.state_dict().items()}
            temperature = float(twin.temperature)
        freqs = arrays.pop("film_frequencies")
        return cls.from_arrays(arrays, freqs, temperature, lam, eps=float(gate.norm.eps), dtype=dtype)

    # ------------------------------------------------------------ inference
    def score_one(self, e: np.ndarray) -> float:
        """Return s (a float32 value as a Python float) for one embedding [d]: the batch-1 fast path.

        No checks and no copies: e must be a 1-D array of self.dtype with embed_dim entries.
        """
        d = self.a.shape[0]
        v = e @ self.a  # [e · A_c/√2, μ]: one matrix-vector product
        mu = float(v[-1])
        inv_sigma = 1.0 / math.sqrt(max(float(e @ e) / d - mu * mu, 0.0) + self.eps)
        u = v[:-1]
        u *= inv_sigma
        u += self.c  # u = h̃ / √2
        t = _erf(u)
        t += 1.0
        t *= u  # u (1 + erf u) = √2 · GELU(h̃)
        z = float(t @ self.w2) + self.b2  # Δ̂ / T
        s = 1.0 / (1.0 + math.exp(-z)) if z >= -700.0 else 0.0  # σ(z) in float64
        return float(np.float32(s))  # rounded once to float32, like MarginGate.score

    def score(self, embedding: np.ndarray) -> np.ndarray:
        """Return s = σ(Δ̂/T) as float32 [n] for embeddings [n, d] (or one [d])."""
        x = np.asarray(embedding, dtype=self.dtype)
        if x.ndim == 1:
            x = x[None, :]
        if x.ndim != 2 or x.shape[1] != self.embed_dim:
            raise DataValidationError(f"embedding has shape {x.shape}, expected [n, {self.embed_dim}]")
        d = x.shape[1]
        v = x @ self.a
        mu = v[:, -1].astype(np.float64)
        var = np.maximum(np.einsum("ij,ij->i", x, x, dtype=np.float64) / d - mu * mu, 0.0)
        inv_sigma = (1.0 / np.sqrt(var + self.eps)).astype(self.dtype)
        u = v[:, :-1] * inv_sigma[:, None] + self.c
        z = (u + u * _erf(u)) @ self.w2 + self.dtype.type(self.b2)
        with np.errstate(over="ignore"):  # exp(−z) → inf for z ≪ 0 gives σ = 0, as it should
            return (1.0 / (1.0 + np.exp(-z.astype(np.float64)))).astype(np.float32)

    def accept(self, embedding: np.ndarray, tau: float) -> np.ndarray:
        """Return accept [n] bool: s ≥ τ*(λ; α) compared as cr2.crc.accept does (float32 score widened)."""
        return self.score(embedding).astype(np.float64) >= float(tau)


__all__ = ["FusedGate"]
