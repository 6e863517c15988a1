"""gsbpolicy: deployable flow-matching policies (GSB-MDPO) for continuous control.

What a user of a policy needs: `GSBPolicy` (load from a folder or the Hub, act, evaluate, save, push),
`evaluate` on Gymnasium envs, `load_policy`/`save_policy` for the policy modules themselves (`FlowPolicy`,
`GaussianActor`, `GenPOFlow`), `PolicySpec` and `make_policy` to build a flow policy from scratch, and the two
errors a load can end in. Everything else in the package is internal to gsbpolicy and its commands.

Importing this package loads only jax, equinox, numpy and safetensors; gymnasium and huggingface_hub are
imported lazily by the functions that need them.
"""

__version__ = "0.1.0"

from ._coupling import GenPOFlow as GenPOFlow
from ._gaussian import GaussianActor as GaussianActor
from ._hub_requests import HubRequestError as HubRequestError
from ._io import PolicyFormatError as PolicyFormatError
from ._kinds import load_policy as load_policy
from ._kinds import save_policy as save_policy
from ._policy import FlowPolicy as FlowPolicy
from ._policy import make_policy as make_policy
from ._sde import PathSample as PathSample
from ._spec import PolicySpec as PolicySpec
from .gsb_policy import GSBPolicy as GSBPolicy
from .gym import EnvOutputError as EnvOutputError
from .gym import EvalResult as EvalResult
from .gym import evaluate as evaluate

__all__ = [
    "GSBPolicy",
    "evaluate",
    "EvalResult",
    "EnvOutputError",
    "load_policy",
    "save_policy",
    "FlowPolicy",
    "GaussianActor",
    "GenPOFlow",
    "PathSample",
    "PolicySpec",
    "make_policy",
    "PolicyFormatError",
    "HubRequestError",
]
