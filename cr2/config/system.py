"""The wireless system of the paper's §IV as configuration: channel-state distributions, hardware profiles, models,
communication, power, cost and channel sections."""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from cr2.core.errors import ConfigError, InvalidValueError
from cr2.config.names import ModelId, StateName
from cr2.config.base import Decibels, Seed, StrictModel, db_to_linear, dbm_to_w
from cr2.config.files import names_in, read_yaml, resolve_named


# ---------------------------------------------------------------- state distributions (configs/states)
class DistanceSpec(StrictModel):
    kind: Literal["uniform"] = "uniform"
    low_m: float = Field(gt=0, description="lower bound of the UE–edge distance, m")
    high_m: float = Field(gt=0, description="upper bound of the UE–edge distance, m")

    @model_validator(mode="after")
    def _ordered(self) -> "DistanceSpec":
        if self.high_m <= self.low_m:
            raise InvalidValueError(f"high_m ({self.high_m}) must exceed low_m ({self.low_m})")
        return self


class FadingSpec(StrictModel):
    kind: Literal["rayleigh", "rician"] = "rayleigh"
    k_factor_db: Decibels | None = Field(None, description="Rician K factor, dB (rician only)")
    _k_factor: float | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _k(self) -> "FadingSpec":
        if self.kind == "rician" and self.k_factor_db is None:
            raise InvalidValueError("rician fading needs k_factor_db")
        if self.kind == "rayleigh" and self.k_factor_db is not None:
            raise InvalidValueError("k_factor_db is only meaningful for rician fading")
        self._k_factor = None if self.k_factor_db is None else db_to_linear(self.k_factor_db)
        return self

    @property
    def k_factor(self) -> float | None:
        """Rician K as a linear power ratio (converted once at load)."""
        return self._k_factor


class PathLossSpec(StrictModel):
    k0_db: Decibels = Field(description="reference gain K0 at d0, dB")
    exponent: float = Field(gt=0, description="path-loss exponent α_pl")
    d0_m: float = Field(gt=0, description="reference distance, m")
    _k0: float = PrivateAttr(0.0)

    def model_post_init(self, __context: Any) -> None:
        self._k0 = db_to_linear(self.k0_db)

    @property
    def k0(self) -> float:
        """K0 as a linear power gain (converted once at load)."""
        return self._k0


class StateDistribution(StrictModel):
    """A named, versioned distribution of the channel state ξ (paper §IV-B)."""

    name: StateName
    version: int = Field(ge=1)
    description: str = ""
    distance: DistanceSpec
    fading: FadingSpec
    path_loss: PathLossSpec

    @property
    def dist_id(self) -> str:
        """Stable id of this distribution: name@version+content hash."""
        digest = hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.name}@v{self.version}-{digest}"


# ---------------------------------------------------------------- hardware profiles (configs/hardware)
class PlatformProfile(StrictModel):
    prefill_flops_per_s: float = Field(gt=0, description="effective prefill throughput, FLOP/s")
    memory_bandwidth_bytes_per_s: float = Field(gt=0, description="effective memory bandwidth for decode, B/s")
    bytes_per_param: float = Field(2.0, gt=0, description="weight precision, bytes per parameter (bf16 = 2)")


class HardwareProfile(StrictModel):
    name: str
    description: str = ""
    platforms: dict[str, PlatformProfile]


class ModelSpec(StrictModel):
    id: ModelId
    hf_name: str
    params: float = Field(gt=0, description="parameter count N_m")
    active_params: float | None = Field(None, gt=0, description="parameters active per token (mixture of experts): "
                                        "the N_m of the compute and decode cost; None: params")
    platform: str
    role: Literal["device", "edge"]
    server_power_w: float | None = Field(None, gt=0, description="edge active power P_m^srv, W (edge models)")


class CommunicationSpec(StrictModel):
    bits_per_input_token: float = Field(gt=0)
    bits_per_output_token: float = Field(gt=0)
    bandwidth_ul_hz: float = Field(gt=0)
    bandwidth_dl_hz: float = Field(gt=0)
    tx_power_ue_w: float = Field(gt=0, description="UE radiated uplink power p_u^ul, W")
    tx_power_bs_w: float = Field(gt=0, description="edge access point radiated power p_bs^dl, W")
    rtt_s: float = Field(ge=0, description="UE–edge round-trip overhead τ_rtt, s")
    carrier_frequency_hz: float = Field(gt=0)
    noise_psd_dbm_per_hz: Decibels = Field(description="noise power spectral density N0, dBm/Hz")
    _noise_psd_w_per_hz: float = PrivateAttr(0.0)

    def model_post_init(self, __context: Any) -> None:
        self._noise_psd_w_per_hz = dbm_to_w(self.noise_psd_dbm_per_hz)

    @property
    def noise_psd_w_per_hz(self) -> float:
        """N0 in W/Hz (converted once at load)."""
        return self._noise_psd_w_per_hz


class PowerSpec(StrictModel):
    ue_tx_w: float = Field(gt=0, description="UE power while transmitting P_u^tx, W")
    ue_rx_w: float = Field(gt=0, description="UE power while receiving P_u^rx, W")
    ue_idle_w: float = Field(ge=0, description="UE idle power P_u^idle, W")
    ue_active_w: float = Field(gt=0, description="UE local-inference power P_0^act, W")


class CostSpec(StrictModel):
    omega_t: float = Field(ge=0, le=1)
    omega_e: float = Field(ge=0, le=1)
    normalisation: Literal["fixed", "reference"] = Field(
        "fixed", description="fixed: the paper's T0/E0; reference: mean latency/energy of m_ref on the train split"
    )
    t0_s: float = Field(gt=0, description="latency scale T0, s")
    e0_j: float = Field(gt=0, description="energy scale E0, J")
    default_output_tokens: dict[str, float] = Field(
        default_factory=dict, description="L_out per benchmark when no label run recorded output lengths, tokens "
        "(default: the definition's default_output_tokens, configs/datasets/<name>.yaml)"
    )

    @model_validator(mode="after")
    def _weights(self) -> "CostSpec":
        if not math.isclose(self.omega_t + self.omega_e, 1.0, abs_tol=1e-9):
            raise InvalidValueError(f"omega_t + omega_e must be 1 (got {self.omega_t} + {self.omega_e})")
        return self


class ChannelSpec(StrictModel):
    distribution: StateDistribution
    draws_per_query: int = Field(1, ge=1, description="channel states sampled per query")
    seed: Seed = 0

    @field_validator("distribution", mode="before")
    @classmethod
    def _load_by_name(cls, value: Any) -> Any:
        if isinstance(value, (str, Path)):
            return read_yaml(resolve_named(value, "states"))
        return value


def merge_hardware_profiles(refs: list[Any]) -> dict[str, Any]:
    """One hardware profile from several (names under configs/hardware/, paths or mappings), platforms merged in
    order; a platform two profiles define differently is an error naming both (so no figure silently wins)."""
    if not refs:
        raise ConfigError("hardware: an empty list; name at least one profile (shipped: " + names_in("hardware") + ")")
    names, descriptions, platforms, owner = [], [], {}, {}
    for ref in refs:
        data = read_yaml(resolve_named(ref, "hardware")) if isinstance(ref, (str, Path)) else dict(ref)
        profile = HardwareProfile.model_validate(data)
        names.append(profile.name)
        if profile.description:
            descriptions.append(f"{profile.name}: {profile.description}")
        for pname, spec in profile.platforms.items():
            if pname in platforms and platforms[pname] != spec:
                raise ConfigError(f"hardware: platform '{pname}' differs between profiles '{owner[pname]}' "
                                  f"({platforms[pname].model_dump()}) and '{profile.name}' ({spec.model_dump()}); "
                                  "rename one of them or drop one profile")
            platforms.setdefault(pname, spec)
            owner.setdefault(pname, profile.name)
    return {"name": "+".join(names), "description": "; ".join(descriptions),
            "platforms": {k: v.model_dump() for k, v in platforms.items()}}
