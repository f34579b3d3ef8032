"""Channel states ξ and the link rates they induce (paper §IV-B, Table I).

A state is a UE–edge distance d and one small-scale fading power gain per link, |z_ul|² and |z_dl|²,
drawn independently. The large-scale gain is g = K0·|z|²·(d/d0)^(−α_pl); the rates are Shannon rates
R = B·log2(1 + p·g/(B·N0)). The distribution is configuration (`StateDistribution`, configs/states/).

Fading. Rayleigh: |z|² ~ Exp(1). Rician with linear K: z = sqrt(K/(K+1)) + sqrt(1/(K+1))·CN(0, 1), so
E|z|² = 1. Both come from one formula over two uniforms (u1, u2): CN(0, 1) = sqrt(−ln(1 − u1))·e^{i2πu2}
(the polar form of Box–Muller), and Rayleigh is the K = 0 case.

Reproducibility. `sample_states(dist, n, seed)` draws n states from one generator.
`sample_states(dist, query_ids, seed, draws_per_query)` (= `sample_query_states`) gives each query its
own generator, seeded by a stable hash of (seed, dist_id, query_id); draw k of a query is row k of that
generator's [K, 5] uniform block. So a query's states never depend on which other queries are
sampled with it, and raising draws_per_query keeps the existing draws.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cr2.config import ChannelSpec, CommunicationSpec, PathLossSpec, StateDistribution
from cr2.core.hashing import stable_u64
from cr2.core.errors import InvalidValueError

# Uniforms per state: distance, |z_ul| (magnitude, phase), |z_dl| (magnitude, phase).
_U_PER_STATE = 5



@dataclass(frozen=True)
class ChannelStates:
    """Channel states ξ, one row per (query, draw) or per sampled state."""

    distance_m: np.ndarray  # [n] float64, UE–edge distance d, m
    fading_ul: np.ndarray  # [n] float64, |z_ul|², linear power gain (unit mean)
    fading_dl: np.ndarray  # [n] float64, |z_dl|², linear power gain (unit mean)
    gain_ul: np.ndarray  # [n] float64, g_ul = K0·|z_ul|²·(d/d0)^(−α_pl), linear
    gain_dl: np.ndarray  # [n] float64, g_dl, linear
    query_id: np.ndarray | None = None  # [n] str, the query a state belongs to (per-query sampling)
    draw: np.ndarray | None = None  # [n] int64, draw index 0..K−1 within its query
    dist_id: str | None = None  # StateDistribution.dist_id the states were drawn from

    def __post_init__(self) -> None:
        n = len(self.distance_m)
        for name in ("distance_m", "fading_ul", "fading_dl", "gain_ul", "gain_dl", "query_id", "draw"):
            arr = getattr(self, name)
            if arr is None:
                continue
            if np.ndim(arr) != 1 or len(arr) != n:
                raise InvalidValueError(f"ChannelStates.{name} has shape {np.shape(arr)}, expected ({n},) like distance_m")

    def __len__(self) -> int:
        return len(self.distance_m)

    def subset(self, idx: np.ndarray) -> "ChannelStates":
        """Rows `idx` (an index array or boolean mask) as new ChannelStates."""
        return ChannelStates(
            distance_m=self.distance_m[idx],
            fading_ul=self.fading_ul[idx],
            fading_dl=self.fading_dl[idx],
            gain_ul=self.gain_ul[idx],
            gain_dl=self.gain_dl[idx],
            query_id=None if self.query_id is None else self.query_id[idx],
            draw=None if self.draw is None else self.draw[idx],
            dist_id=self.dist_id,
        )


# ---------------------------------------------------------------- formulas
def fading_power(u_magnitude: np.ndarray, u_phase: np.ndarray, k_factor: float | None) -> np.ndarray:
    """|z|² from two uniforms in [0, 1): Exp(1) for Rayleigh (k_factor None or 0), Rician with linear K."""
    k = 0.0 if k_factor is None else float(k_factor)
    if k < 0:
        raise InvalidValueError(f"Rician K factor must be ≥ 0 (linear), got {k}")
    # CN(0, 1) in polar form: |w|² = −ln(1 − u1) ~ Exp(1), arg w = 2π u2 (1 − u1 ∈ (0, 1], so the log is finite)
    power = -np.log1p(-np.asarray(u_magnitude, dtype=np.float64))
    if k == 0.0:
        # Rayleigh: |z|² = |CN(0,1)|² ~ Exp(1)
        return power
    radius = np.sqrt(power)
    angle = 2.0 * np.pi * np.asarray(u_phase, dtype=np.float64)
    los = np.sqrt(k / (k + 1.0))
    scatter = np.sqrt(1.0 / (k + 1.0))
    # paper §IV-B fading: |z|² = |sqrt(K/(K+1)) + sqrt(1/(K+1))·CN(0,1)|², unit mean
    re = los + scatter * radius * np.cos(angle)
    im = scatter * radius * np.sin(angle)
    return re * re + im * im


# the longest UE–edge distance a routing request may name (100 km, far beyond any cell): the rates and costs stay
# finite and warning-free below it, while d = 1e308 m would make them 0 and ∞
MAX_DISTANCE_M = 1e5
# the shortest: the path-loss model's reference distance d0 in every shipped state distribution. Nearer than that
# the far-field model does not apply, and d = 1e-300 m would overflow the gain to ∞
MIN_DISTANCE_M = 1.0


def channel_gain(distance_m: np.ndarray, fading: np.ndarray, path_loss: PathLossSpec) -> np.ndarray:
    """Linear channel gain g for distances d and fading powers |z|²."""
    distance_m = np.asarray(distance_m, dtype=np.float64)
    # paper §IV-B gain: g = K0·|z|²·(d/d0)^(−α_pl)
    return path_loss.k0 * np.asarray(fading, dtype=np.float64) * (distance_m / path_loss.d0_m) ** (-path_loss.exponent)


def shannon_rate_bps(bandwidth_hz: float, tx_power_w: float, gain: np.ndarray, noise_psd_w_per_hz: float) -> np.ndarray:
    """Shannon rate of a link, bit/s."""
    gain = np.asarray(gain, dtype=np.float64)
    # paper §IV-B (R^ul, R^dl): R = B·log2(1 + p·g/(B·N0))
    snr = tx_power_w * gain / (bandwidth_hz * noise_psd_w_per_hz)
    return bandwidth_hz * np.log1p(snr) / np.log(2.0)  # log1p: exact also at SNR ≪ 1 (far, deep fade)


def uplink_rate_bps(gain_ul: np.ndarray, comm: CommunicationSpec) -> np.ndarray:
    """R^ul(ξ) with the UE's radiated power p_u^ul and B^ul."""
    # paper §IV-B (R^ul): R^ul = B^ul·log2(1 + p_u^ul·g^ul/(B^ul·N0))
    return shannon_rate_bps(comm.bandwidth_ul_hz, comm.tx_power_ue_w, gain_ul, comm.noise_psd_w_per_hz)


def downlink_rate_bps(gain_dl: np.ndarray, comm: CommunicationSpec) -> np.ndarray:
    """R^dl(ξ) with the access point's radiated power p_bs^dl and B^dl."""
    # paper §IV-B (R^dl): R^dl = B^dl·log2(1 + p_bs^dl·g^dl/(B^dl·N0))
    return shannon_rate_bps(comm.bandwidth_dl_hz, comm.tx_power_bs_w, gain_dl, comm.noise_psd_w_per_hz)


def rates(states: ChannelStates, comm: CommunicationSpec) -> tuple[np.ndarray, np.ndarray]:
    """(rate_ul_bps [n], rate_dl_bps [n]) of each state."""
    return uplink_rate_bps(states.gain_ul, comm), downlink_rate_bps(states.gain_dl, comm)


# ---------------------------------------------------------------- sampling
def states_from_uniforms(dist: StateDistribution, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distance_m, fading_ul, fading_dl) from an [n, 5] block of uniforms in [0, 1)."""
    u = np.asarray(u, dtype=np.float64)
    if u.ndim != 2 or u.shape[1] != _U_PER_STATE:
        raise InvalidValueError(f"uniform block has shape {u.shape}, expected (n, {_U_PER_STATE})")
    if dist.distance.kind != "uniform":  # pragma: no cover - the config admits only 'uniform' today
        raise InvalidValueError(f"unsupported distance distribution '{dist.distance.kind}'")
    # d ~ U(low_m, high_m)
    distance_m = dist.distance.low_m + (dist.distance.high_m - dist.distance.low_m) * u[:, 0]
    k = dist.fading.k_factor if dist.fading.kind == "rician" else None
    fading_ul = fading_power(u[:, 1], u[:, 2], k)
    fading_dl = fading_power(u[:, 3], u[:, 4], k)
    return distance_m, fading_ul, fading_dl


def _build(dist: StateDistribution, u: np.ndarray, query_id=None, draw=None) -> ChannelStates:
    distance_m, fading_ul, fading_dl = states_from_uniforms(dist, u)
    return ChannelStates(
        distance_m=distance_m,
        fading_ul=fading_ul,
        fading_dl=fading_dl,
        gain_ul=channel_gain(distance_m, fading_ul, dist.path_loss),
        gain_dl=channel_gain(distance_m, fading_dl, dist.path_loss),
        query_id=query_id,
        draw=draw,
        dist_id=dist.dist_id,
    )


def sample_states(
    dist: StateDistribution,
    queries: int | Sequence[str] | np.ndarray,
    seed: int | np.random.Generator,
    draws_per_query: int = 1,
) -> ChannelStates:
    """Channel states from `dist`, deterministic in `seed`.

    queries = n (an int): n i.i.d. states from one generator (`seed` may be a Generator). queries = an
    array of query ids: `draws_per_query` states per query, each query with its own generator
    (see `sample_query_states`) — the form the pipeline uses, stable as queries are added.
    """
    if isinstance(queries, (int, np.integer)):
        if queries < 0:
            raise InvalidValueError(f"n must be a non-negative integer, got {queries!r}")
        if draws_per_query != 1:
            raise InvalidValueError("draws_per_query applies to per-query sampling; pass query ids, or n = n_queries·K")
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        return _build(dist, rng.random((int(queries), _U_PER_STATE)))
    if isinstance(seed, np.random.Generator):
        raise InvalidValueError("per-query sampling derives one generator per query from an integer seed; pass an int")
    return sample_query_states(dist, queries, draws_per_query, seed)


def query_rng(seed: int, dist_id: str, query_id: str) -> np.random.Generator:
    """The generator of one query's states: seeded by a stable hash of (seed, dist_id, query_id)."""
    return np.random.default_rng(stable_u64("cr2-channel", seed, dist_id, query_id))


def sample_query_states(
    dist: StateDistribution, query_ids: Sequence[str] | np.ndarray, draws_per_query: int, seed: int
) -> ChannelStates:
    """K = draws_per_query states per query, rows query-major (q0 d0, q0 d1, …), with query_id and draw.

    A query's states depend only on (seed, dist.dist_id, query_id, draw): adding or removing other
    queries, reordering them, or raising K never changes an existing (query, draw) state.
    """
    ids = np.asarray(query_ids, dtype=object)
    if ids.ndim != 1:
        raise InvalidValueError(f"query_ids must be 1-D, got shape {ids.shape}")
    if int(draws_per_query) != draws_per_query or draws_per_query < 1:
        raise InvalidValueError(f"draws_per_query must be an integer ≥ 1, got {draws_per_query!r}")
    k = int(draws_per_query)
    uniq, counts = np.unique(ids.astype(str), return_counts=True) if len(ids) else (ids, np.array([], int))
    if len(ids) and counts.max() > 1:
        dups = uniq[counts > 1][:3].tolist()
        raise InvalidValueError(f"query_ids must be unique; repeated: {dups} ({int((counts > 1).sum())} ids)")
    dist_id = dist.dist_id
    u = np.empty((len(ids), k, _U_PER_STATE))
    for i, q in enumerate(ids):  # one small generator per query: ≈ 8 µs each, 21.5k queries ≈ 0.2 s
        u[i] = query_rng(seed, dist_id, str(q)).random((k, _U_PER_STATE))
    return _build(
        dist,
        u.reshape(len(ids) * k, _U_PER_STATE),
        query_id=np.repeat(ids.astype(str), k),
        draw=np.tile(np.arange(k, dtype=np.int64), len(ids)),
    )


def sample_channel(channel: ChannelSpec, query_ids: Sequence[str] | np.ndarray) -> ChannelStates:
    """The config's states for `query_ids`: its distribution, draws_per_query and seed."""
    return sample_query_states(channel.distribution, query_ids, channel.draws_per_query, channel.seed)
