"""Typed configuration of cr2, loaded from YAML (configs/default.yaml is the paper's Table I).

Every physical quantity carries its unit in the field name; dB and dBm values are converted to linear
units once, here, at load time. Unknown keys are errors that name the key path. A state distribution
(configs/states/NAME.yaml) and a hardware profile (configs/hardware/NAME.yaml) are referenced by name
or path and resolved at load, so the resolved config — and its hash — covers them.

One module per concern: base (units, the strict model), files (finding and reading YAML), system (§IV:
states, hardware, models, cost, channel), inputs, method, label_sources, evaluation, serving, root (Config) and
loader; lmeval holds the settings of `cr2 label` (labelling with lm-evaluation-harness);
beside them: where the shipped configs and data are (shipped), the pattern of user-given names (names) and which
config fields a computation reads (reads).
"""
from cr2.config.shipped import CONFIG_DIR, REPO_ROOT
from cr2.config.base import StrictModel, db_to_linear, dbm_to_w
from cr2.config.files import format_validation, names_in, read_yaml, resolve_named
from cr2.config.system import (
    ChannelSpec, CommunicationSpec, CostSpec, DistanceSpec, FadingSpec, HardwareProfile, ModelSpec,
    PathLossSpec, PlatformProfile, PowerSpec, StateDistribution, merge_hardware_profiles)
from cr2.config.inputs import BenchmarkSpec, EmbeddingSpec, SplitSpec, TokenizerSpec
from cr2.config.method import (
    BaselinesSpec, CalibrationSpec, CertifySpec, FitSpec, GateSpec, GridSpec, HEADLINE_LAMS, LambdaGrid,
    RoutingSpec, TeacherSpec)
from cr2.config.label_sources import (
    DEFAULT_MEASURED_NAMES, OutputTokenDist, LabelSpec, MeasuredLabelsSpec, MeasuredOrigin, SimcheckSpec,
    SimulatorShape, SimulatorSpec)
from cr2.config.evaluation import BootstrapSpec, EvaluationSpec
from cr2.config.serving import ServingSpec
from cr2.config.root import Config
from cr2.config.loader import DEFAULT_CONFIG, deep_merge, load_config, load_state_distribution, resolve_config_path

__all__ = [
    "CONFIG_DIR", "REPO_ROOT", "StrictModel", "db_to_linear", "dbm_to_w", "format_validation", "names_in",
    "read_yaml", "resolve_named", "ChannelSpec", "CommunicationSpec", "CostSpec", "DistanceSpec", "FadingSpec",
    "HardwareProfile", "ModelSpec", "PathLossSpec", "PlatformProfile", "PowerSpec", "StateDistribution",
    "merge_hardware_profiles", "BenchmarkSpec", "EmbeddingSpec", "SplitSpec", "TokenizerSpec", "BaselinesSpec",
    "CalibrationSpec", "CertifySpec", "FitSpec", "GateSpec", "GridSpec", "HEADLINE_LAMS", "LambdaGrid",
    "RoutingSpec", "TeacherSpec", "DEFAULT_MEASURED_NAMES", "OutputTokenDist", "LabelSpec", "MeasuredLabelsSpec",
    "MeasuredOrigin", "SimcheckSpec", "SimulatorShape", "SimulatorSpec", "BootstrapSpec", "EvaluationSpec",
    "ServingSpec", "Config", "DEFAULT_CONFIG", "deep_merge", "load_config", "load_state_distribution",
    "resolve_config_path"]
