"""gsbpolicy: deployable flow-matching policies (GSB-MDPO) for continuous control.

Every policy kind the trainers write (flow policies, Gaussian actors, GenPO's coupling flow) saves with
`save_policy` and loads with `load_policy` or `GSBPolicy.from_pretrained`. Public modules beside this one:
`gsbpolicy.files` (crash-safe writes, reproducible safetensors bytes) and `gsbpolicy.cli` (one-line
command errors). Importing this package loads only jax, equinox, numpy and safetensors; gymnasium and
huggingface_hub are imported lazily by the functions that need them.
"""

__version__ = "0.1.0"

from ._coupling import GenPOFlow as GenPOFlow
from ._coupling import make_genpo as make_genpo
from ._envid import EnvKind as EnvKind
from ._envid import env_kind as env_kind
from ._gaussian import GaussianActor as GaussianActor
from ._gaussian import GaussianSpec as GaussianSpec
from ._gaussian import tanh_log_det as tanh_log_det
from ._hub_requests import HubRequestError as HubRequestError
from ._io import CONFIG_NAME as CONFIG_NAME
from ._io import WEIGHTS_NAME as WEIGHTS_NAME
from ._io import PolicyFormatError as PolicyFormatError
from ._io import policy_tensors as policy_tensors
from ._kinds import config_kind_and_spec as config_kind_and_spec
from ._kinds import load_policy as load_policy
from ._kinds import policy_kind as policy_kind
from ._kinds import save_policy as save_policy
from ._networks import ACTIVATIONS as ACTIVATIONS
from ._networks import DriftMLP as DriftMLP
from ._normalizer import RunningNorm as RunningNorm
from ._policy import FlowPolicy as FlowPolicy
from ._policy import make_policy as make_policy
from ._policy import noise_shape as noise_shape
from ._policy import sample_noise as sample_noise
from ._schedules import AbstractSigmaSchedule as AbstractSigmaSchedule
from ._schedules import ConstantSigma as ConstantSigma
from ._schedules import ExponentialSigma as ExponentialSigma
from ._schedules import LinearSigma as LinearSigma
from ._schedules import time_grid as time_grid
from ._sde import PathSample as PathSample
from ._sde import gaussian_log_prob as gaussian_log_prob
from ._sde import prior_log_prob as prior_log_prob
from ._spec import FORMAT_VERSION as FORMAT_VERSION
from ._spec import PolicySpec as PolicySpec
from .gym import EvalResult as EvalResult
from .gym import evaluate as evaluate
from .hub import GSBPolicy as GSBPolicy
