"""Latency, energy and normalised deployment cost of every model for every (query, state) (paper §IV-B..F).

The whole cost model of docs/cost-model.md, one equation per function, composed by `compute_costs`:

    S_ul = b_in·L_in,  S_dl,m = b_out·L_out,m                       payloads, bit
    τ_ul = S_ul/R_ul,  τ_dl,m = S_dl,m/R_dl                          transfer times, s
    Φ_pre = 2·N_m·L_in,  Φ_dec = 2·N_m·L_out,m                       workload, FLOP   [cr2 decision]
    τ_inf,m = β_pre,m·Φ_pre + β_dec,m·Φ_dec                          inference time, s
    t_0 = τ_inf,0;   t_m = τ_ul + τ_rtt + τ_inf,m + τ_dl,m            latency, s
    e_0 = P0_act·τ_inf,0
    e_m = P_tx·τ_ul + P_rx·τ_dl,m + P_idle·(τ_rtt + τ_inf,m) + P_srv,m·τ_inf,m      energy, J
    c̄_m = ω_t·t_m/T0 + ω_e·e_m/E0;   c_m = c̄_m / c̄_ref  (so c_ref ≡ 1)

The paper's system-model equations carry no \\label; comments cite them by section and symbol.

β from the hardware profile [cr2 decision] (configs/hardware/default.yaml): a platform gives an
effective prefill throughput F (FLOP/s), a decode memory bandwidth W (B/s) and the weight precision
b (B/param). β_pre = 1/F s/FLOP. Decoding one token streams all weights once, N·b/W seconds, while
Φ_dec counts 2·N FLOP per token, so β_dec = b/(2·W) s/FLOP and β_dec·Φ_dec = N·b·L_out/W.

Rows are (query, state) pairs: with K draws per query, repeat the query's tokens K times.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cr2.config import CommunicationSpec, Config, CostSpec, HardwareProfile, ModelSpec, PlatformProfile, PowerSpec
from cr2.core.errors import InvalidValueError


@dataclass(frozen=True)
class CostBreakdown:
    """Latency, energy and cost of each model, [n, M] in pool order, with every term kept for auditing."""

    model_ids: tuple[str, ...]  # pool order; index 0 is the device model m0
    ref_index: int  # column of m_ref (cost_norm[:, ref_index] == 1)
    tau_ul_s: np.ndarray  # [n] float64, uplink transfer time τ_ul (edge models only pay it)
    tau_dl_s: np.ndarray  # [n, M] float64, downlink transfer time τ_dl,m; 0 for the device model
    tau_inf_s: np.ndarray  # [n, M] float64, inference time τ_inf,m
    latency_s: np.ndarray  # [n, M] float64, end-to-end latency t_m
    energy_tx_j: np.ndarray  # [n, M] float64, P_tx·τ_ul (0 for m0)
    energy_rx_j: np.ndarray  # [n, M] float64, P_rx·τ_dl,m (0 for m0)
    energy_idle_j: np.ndarray  # [n, M] float64, P_idle·(τ_rtt + τ_inf,m) (0 for m0)
    energy_server_j: np.ndarray  # [n, M] float64, P_srv,m·τ_inf,m (0 for m0)
    energy_device_j: np.ndarray  # [n, M] float64, P0_act·τ_inf,0 (m0 only; 0 for edge models)
    energy_j: np.ndarray  # [n, M] float64, e_m = sum of the five energy terms
    cost_raw: np.ndarray  # [n, M] float64, c̄_m (dimensionless)
    cost_norm: np.ndarray  # [n, M] float64, c_m = c̄_m / c̄_ref
    t0_s: float  # latency scale T0 used, s
    e0_j: float  # energy scale E0 used, J
    normalisation: str  # 'fixed' or 'reference'

    def __post_init__(self) -> None:
        n, m = self.latency_s.shape
        if len(self.model_ids) != m:
            raise InvalidValueError(f"CostBreakdown has {len(self.model_ids)} model ids for {m} cost columns")
        if self.tau_ul_s.shape != (n,):
            raise InvalidValueError(f"CostBreakdown.tau_ul_s has shape {self.tau_ul_s.shape}, expected ({n},)")
        for name in ("tau_dl_s", "tau_inf_s", "energy_tx_j", "energy_rx_j", "energy_idle_j", "energy_server_j",
                     "energy_device_j", "energy_j", "cost_raw", "cost_norm"):
            if getattr(self, name).shape != (n, m):
                raise InvalidValueError(f"CostBreakdown.{name} has shape {getattr(self, name).shape}, expected ({n}, {m})")

    def __len__(self) -> int:
        return self.latency_s.shape[0]


# ---------------------------------------------------------------- one equation each
def uplink_payload_bits(prompt_tokens: np.ndarray, comm: CommunicationSpec) -> np.ndarray:
    """S_ul, bit."""
    # paper §IV-B (S^ul): S^ul(x) = b_in·L_in(x)
    return comm.bits_per_input_token * np.asarray(prompt_tokens, dtype=np.float64)


def downlink_payload_bits(output_tokens: np.ndarray, comm: CommunicationSpec) -> np.ndarray:
    """S_dl,m, bit."""
    # paper §IV-B (S_m^dl): S_m^dl(x) = b_out·L_out,m(x)
    return comm.bits_per_output_token * np.asarray(output_tokens, dtype=np.float64)


def transfer_time_s(payload_bits: np.ndarray, rate_bps: np.ndarray) -> np.ndarray:
    """τ = S/R, s."""
    # paper §IV-B (τ^ul, τ_m^dl): τ = S/R
    return np.asarray(payload_bits, dtype=np.float64) / np.asarray(rate_bps, dtype=np.float64)


def prefill_flops(params: float, prompt_tokens: np.ndarray) -> np.ndarray:
    """Φ_pre = 2·N_m·L_in, FLOP [cr2 decision]."""
    # paper §IV-C (Φ_m^pre), docs/cost-model.md: Φ_pre = 2·N_m·L_in
    return 2.0 * params * np.asarray(prompt_tokens, dtype=np.float64)


def decode_flops(params: float, output_tokens: np.ndarray) -> np.ndarray:
    """Φ_dec = 2·N_m·L_out,m, FLOP [cr2 decision]."""
    # paper §IV-C (Φ_m^dec), docs/cost-model.md: Φ_dec = 2·N_m·L_out,m
    return 2.0 * params * np.asarray(output_tokens, dtype=np.float64)


def beta_prefill_s_per_flop(platform: PlatformProfile) -> float:
    """β_pre = 1 / effective prefill throughput, s/FLOP."""
    return 1.0 / platform.prefill_flops_per_s


def beta_decode_s_per_flop(platform: PlatformProfile) -> float:
    """β_dec = bytes_per_param / (2·memory bandwidth), s/FLOP: one token streams N·b bytes for 2·N FLOP."""
    return platform.bytes_per_param / (2.0 * platform.memory_bandwidth_bytes_per_s)


def inference_time_s(model: ModelSpec, platform: PlatformProfile, prompt_tokens: np.ndarray,
                     output_tokens: np.ndarray) -> np.ndarray:
    """τ_inf,m of `model` on `platform`, s."""
    # paper §IV-C (τ_m^inf): τ_inf,m = β_pre,m·Φ_pre + β_dec,m·Φ_dec
    n_active = model.active_params if model.active_params is not None else model.params  # MoE: per-token N_m
    return (beta_prefill_s_per_flop(platform) * prefill_flops(n_active, prompt_tokens)
            + beta_decode_s_per_flop(platform) * decode_flops(n_active, output_tokens))


def raw_cost(latency_s: np.ndarray, energy_j: np.ndarray, cost_spec: CostSpec, t0_s: float, e0_j: float) -> np.ndarray:
    """c̄_m, dimensionless."""
    # paper §IV-F (c̄_m): c̄_m = ω_t·t_m/T0 + ω_e·e_m/E0
    return cost_spec.omega_t * latency_s / t0_s + cost_spec.omega_e * energy_j / e0_j


def cost_scales(latency_s: np.ndarray, energy_j: np.ndarray, ref_index: int, cost_spec: CostSpec,
                reference_mask: np.ndarray | None = None) -> tuple[float, float]:
    """(T0, E0): the config's fixed scales, or the mean latency/energy of m_ref over `reference_mask` rows."""
    if cost_spec.normalisation == "fixed":
        return float(cost_spec.t0_s), float(cost_spec.e0_j)
    if reference_mask is None:
        raise InvalidValueError(
            "cost.normalisation is 'reference' but no reference_mask was given; pass the rows of the "
            "reference set (default: the train split with its states) or set cost.normalisation: fixed"
        )
    mask = np.asarray(reference_mask)
    n = latency_s.shape[0]
    if mask.dtype == bool:
        if mask.shape != (n,):
            raise InvalidValueError(f"reference_mask has shape {mask.shape}, expected ({n},) (one flag per row)")
        rows = np.flatnonzero(mask)
    else:
        rows = mask.astype(np.int64).ravel()
        if len(rows) and (rows.min() < -n or rows.max() >= n):
            raise InvalidValueError(f"reference_mask indexes rows outside 0..{n - 1}")
    if len(rows) == 0:
        raise InvalidValueError("reference_mask selects no rows; T0 and E0 would be the mean of an empty set")
    # paper §IV-F: T0, E0 = mean latency and energy of the largest model on a reference set
    return float(latency_s[rows, ref_index].mean()), float(energy_j[rows, ref_index].mean())


# ---------------------------------------------------------------- the whole model
def _as_1d(name: str, arr, n: int | None = None) -> np.ndarray:
    a = np.asarray(arr, dtype=np.float64)
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        want = f"({n},)" if n is not None else "(n,)"
        raise InvalidValueError(f"{name} has shape {a.shape}, expected {want}")
    if not np.all(np.isfinite(a)):
        raise InvalidValueError(f"{name} has {int((~np.isfinite(a)).sum())} non-finite values (NaN or inf)")
    return a


def _ref_index(models: Sequence[ModelSpec], ref_model_id: str | None) -> int:
    ids = [m.id for m in models]
    if ref_model_id is None:
        return int(np.argmax([m.params for m in models]))  # the config's default: the largest model
    if ref_model_id not in ids:
        raise InvalidValueError(f"reference model '{ref_model_id}' is not in the pool {ids}")
    return ids.index(ref_model_id)


def compute_costs(
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    rate_ul_bps: np.ndarray,
    rate_dl_bps: np.ndarray,
    models: Sequence[ModelSpec] | None = None,
    hardware: HardwareProfile | None = None,
    comm: CommunicationSpec | None = None,
    power: PowerSpec | None = None,
    cost_spec: CostSpec | None = None,
    reference_mask: np.ndarray | None = None,
    ref_model_id: str | None = None,
    config: Config | None = None,
) -> CostBreakdown:
    """Latency t_m, energy e_m, raw cost c̄_m and normalised cost c_m of every model for every row.

    prompt_tokens: [n] L_in(x) > 0; output_tokens: [n, M] L_out,m(x) ≥ 0 in pool order; rate_ul_bps,
    rate_dl_bps: [n] > 0 (from cr2.system.channel.rates). models[0] must be the device model. ref_model_id:
    m_ref (config.ref_model_id; None: the model with the most parameters). reference_mask: the rows
    (boolean [n] or indices) whose m_ref mean gives T0 and E0 when cost_spec.normalisation == 'reference'.
    config: supplies every section left None (pool, hardware, communication, power, cost, m_ref).
    """
    if config is not None:
        models = config.models if models is None else models
        hardware = config.hardware if hardware is None else hardware
        comm = config.communication if comm is None else comm
        power = config.power if power is None else power
        cost_spec = config.cost if cost_spec is None else cost_spec
        ref_model_id = config.ref_model_id if ref_model_id is None else ref_model_id
    absent = [k for k, v in (("models", models), ("hardware", hardware), ("comm", comm), ("power", power),
                             ("cost_spec", cost_spec)) if v is None]
    if absent:
        raise InvalidValueError(f"compute_costs needs {', '.join(absent)} (or config=...)")
    models = list(models)
    if len(models) < 2 or models[0].role != "device" or any(m.role != "edge" for m in models[1:]):
        raise InvalidValueError(
            f"models must list the device model first and then ≥ 1 edge models; got roles {[m.role for m in models]}"
        )
    for m in models:
        if m.platform not in hardware.platforms:
            raise InvalidValueError(f"model '{m.id}' runs on platform '{m.platform}', not in hardware profile '{hardware.name}'")
        if m.role == "edge" and m.server_power_w is None:
            raise InvalidValueError(f"edge model '{m.id}' needs server_power_w")
    n_models = len(models)
    l_in = _as_1d("prompt_tokens", prompt_tokens)
    n = l_in.shape[0]
    l_out = np.asarray(output_tokens, dtype=np.float64)
    if l_out.shape != (n, n_models):
        raise InvalidValueError(f"output_tokens has shape {l_out.shape}, expected ({n}, {n_models}) = (rows, models in pool order)")
    if not np.all(np.isfinite(l_out)):
        raise InvalidValueError("output_tokens has NaN or inf entries; fill them first (cr2.system.cost.fill_output_tokens)")
    r_ul = _as_1d("rate_ul_bps", rate_ul_bps, n)
    r_dl = _as_1d("rate_dl_bps", rate_dl_bps, n)
    if np.any(l_in <= 0):
        raise InvalidValueError(f"prompt_tokens must be > 0; {int((l_in <= 0).sum())} rows are not (min {l_in.min()})")
    if np.any(l_out < 0):
        raise InvalidValueError(f"output_tokens must be ≥ 0; {int((l_out < 0).sum())} entries are negative")
    for name, r in (("rate_ul_bps", r_ul), ("rate_dl_bps", r_dl)):
        if np.any(r <= 0):
            raise InvalidValueError(f"{name} must be > 0; {int((r <= 0).sum())} rows are not (min {r.min()})")
    ref = _ref_index(models, ref_model_id)

    tau_ul = transfer_time_s(uplink_payload_bits(l_in, comm), r_ul)
    tau_dl = transfer_time_s(downlink_payload_bits(l_out, comm), r_dl[:, None])
    tau_inf = np.stack(
        [inference_time_s(m, hardware.platforms[m.platform], l_in, l_out[:, j]) for j, m in enumerate(models)], axis=1
    )
    edge = np.zeros(n_models, dtype=bool)
    edge[1:] = True
    tau_dl = np.where(edge, tau_dl, 0.0)  # the device model sends and receives nothing

    # paper §IV-D (t_0, t_m): t_0 = τ_inf,0;  t_m = τ_ul + τ_rtt + τ_inf,m + τ_dl,m for edge models
    latency = np.where(edge, tau_ul[:, None] + comm.rtt_s + tau_inf + tau_dl, tau_inf)

    p_srv = np.array([0.0 if m.role == "device" else float(m.server_power_w) for m in models])
    # paper §IV-E (e_0): e_0 = P0_act·τ_inf,0
    e_device = np.where(edge, 0.0, power.ue_active_w * tau_inf)
    # paper §IV-E (e_m): e_m = P_tx·τ_ul + P_rx·τ_dl,m + P_idle·(τ_rtt + τ_inf,m) + P_srv,m·τ_inf,m
    e_tx = np.where(edge, power.ue_tx_w * tau_ul[:, None], 0.0)
    e_rx = np.where(edge, power.ue_rx_w * tau_dl, 0.0)
    e_idle = np.where(edge, power.ue_idle_w * (comm.rtt_s + tau_inf), 0.0)
    e_srv = np.where(edge, p_srv[None, :] * tau_inf, 0.0)
    energy = e_device + e_tx + e_rx + e_idle + e_srv

    t0_s, e0_j = cost_scales(latency, energy, ref, cost_spec, reference_mask)
    c_raw = raw_cost(latency, energy, cost_spec, t0_s, e0_j)
    # paper §IV-F (c_m): c_m = c̄_m / c̄_ref, so c_ref ≡ 1 per (query, state)
    c_norm = c_raw / c_raw[:, ref:ref + 1]
    c_norm[:, ref] = 1.0  # exactly, not 1 ± 1 ulp
    return CostBreakdown(
        model_ids=tuple(m.id for m in models),
        ref_index=ref,
        tau_ul_s=tau_ul,
        tau_dl_s=tau_dl,
        tau_inf_s=tau_inf,
        latency_s=latency,
        energy_tx_j=e_tx,
        energy_rx_j=e_rx,
        energy_idle_j=e_idle,
        energy_server_j=e_srv,
        energy_device_j=e_device,
        energy_j=energy,
        cost_raw=c_raw,
        cost_norm=c_norm,
        t0_s=t0_s,
        e0_j=e0_j,
        normalisation=cost_spec.normalisation,
    )


def costs_from_config(
    config: Config,
    prompt_tokens: np.ndarray,
    output_tokens: np.ndarray,
    rate_ul_bps: np.ndarray,
    rate_dl_bps: np.ndarray,
    reference_mask: np.ndarray | None = None,
) -> CostBreakdown:
    """`compute_costs` with the config's pool, m_ref, hardware, communication, power and cost sections."""
    return compute_costs(prompt_tokens, output_tokens, rate_ul_bps, rate_dl_bps, reference_mask=reference_mask,
                         config=config)


def fill_output_tokens(benchmarks: np.ndarray, n_models: int, cost_spec: CostSpec,
                       recorded: np.ndarray | None = None) -> np.ndarray:
    """L_out,m(x) as [n, n_models] float: the recorded length where known, else the benchmark's default.

    recorded: [n, n_models] float with NaN where a labeling run recorded no length (None: all defaults).
    """
    benchmarks = np.asarray(benchmarks).astype(str)
    missing = sorted(set(benchmarks) - set(cost_spec.default_output_tokens))
    if missing:
        raise InvalidValueError(f"cost.default_output_tokens has no entry for benchmark(s) {missing}")
    lookup = np.vectorize(cost_spec.default_output_tokens.__getitem__, otypes=[np.float64])
    default = np.repeat(lookup(benchmarks)[:, None], n_models, axis=1) if len(benchmarks) else np.zeros((0, n_models))
    if recorded is None:
        return default
    recorded = np.asarray(recorded, dtype=np.float64)
    if recorded.shape != default.shape:
        raise InvalidValueError(f"recorded output tokens have shape {recorded.shape}, expected {default.shape}")
    return np.where(np.isnan(recorded), default, recorded)


def output_token_estimates(benchmarks: np.ndarray, output_tokens: np.ndarray, fit_mask: np.ndarray,
                           cost_spec: CostSpec) -> dict[str, list[float]]:
    """L̂_out,m(b): per (benchmark, model), the mean realised output length over the `fit_mask` rows (train).

    This is the "estimated output token count used for pre-execution routing" of the paper: known before a
    model runs, unlike the realised L_out,m(x). A benchmark without fit rows falls back to
    cost.default_output_tokens. benchmarks: [n] str; output_tokens: [n, M]; fit_mask: [n] bool.
    """
    benchmarks = np.asarray(benchmarks).astype(str)
    output_tokens = np.asarray(output_tokens, dtype=np.float64)
    fit_mask = np.asarray(fit_mask, dtype=bool)
    out = {}
    for b in sorted(set(benchmarks)):
        rows = (benchmarks == b) & fit_mask
        if rows.any():
            out[b] = [float(v) for v in output_tokens[rows].mean(axis=0)]
        elif b in cost_spec.default_output_tokens:
            out[b] = [float(cost_spec.default_output_tokens[b])] * output_tokens.shape[1]
        else:
            raise InvalidValueError(f"no train rows and no cost.default_output_tokens entry for benchmark '{b}'")
    return out


def estimated_output_tokens(benchmarks: np.ndarray, estimates: dict[str, list[float]], n_models: int) -> np.ndarray:
    """L̂_out,m(x) as [n, n_models]: the estimate of each row's benchmark (output_token_estimates)."""
    benchmarks = np.asarray(benchmarks).astype(str)
    missing = sorted(set(benchmarks) - set(estimates))
    if missing:
        raise InvalidValueError(f"no output-length estimate for benchmark(s) {missing}; known: {sorted(estimates)}")
    table = {b: np.asarray(v, dtype=np.float64) for b, v in estimates.items()}
    if any(len(v) != n_models for v in table.values()):
        raise InvalidValueError(f"output-length estimates must have {n_models} entries per benchmark")
    return np.stack([table[b] for b in benchmarks]) if len(benchmarks) else np.zeros((0, n_models))


def device_dearer_share(cost: np.ndarray) -> float:
    """Share of rows where the device model m0 is dearer than the cheapest edge model (paper assumes never)."""
    cost = np.asarray(cost, dtype=np.float64)
    return float(np.mean(cost[:, 0] > cost[:, 1:].min(axis=1))) if len(cost) else float("nan")
