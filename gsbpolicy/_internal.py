"""The internals of the policy library that the repository's own commands build on (the trainers, the exporter
and the publisher): one seam, so that what they depend on is listed here and nowhere else. Not for users: the
public names are `gsbpolicy.__all__`; these may change with any release.
"""

from ._coupling import make_genpo as make_genpo
from ._envid import env_kind as env_kind
from ._gaussian import GaussianSpec as GaussianSpec
from ._io import CONFIG_NAME as CONFIG_NAME
from ._io import policy_tensors as policy_tensors
from ._kinds import config_kind_and_spec as config_kind_and_spec
from ._kinds import policy_kind as policy_kind
from ._networks import ACTIVATIONS as ACTIVATIONS
from ._normalizer import RunningNorm as RunningNorm
from ._policy import sample_noise as sample_noise
from ._schedules import time_grid as time_grid
from ._sde import prior_log_prob as prior_log_prob
