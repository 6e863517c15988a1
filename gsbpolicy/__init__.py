"""gsbpolicy: deployable flow-matching policies (GSB-MDPO) for continuous control.

Importing this package loads only jax, equinox, numpy and safetensors; gymnasium and huggingface_hub
are imported lazily by the functions that need them.
"""

__version__ = "0.1.0"

from ._envid import EnvKind as EnvKind
from ._envid import env_kind as env_kind
from ._io import PolicyFormatError as PolicyFormatError
from ._io import load_policy as load_policy
from ._io import save_policy as save_policy
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
from ._spec import FORMAT_VERSION as FORMAT_VERSION
from ._spec import PolicySpec as PolicySpec
from .gym import EvalResult as EvalResult
from .gym import evaluate as evaluate
from .hub import GSBPolicy as GSBPolicy
