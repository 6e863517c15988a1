"""Fine-tuning: a run's actor starts from a pretrained flow policy (`--init-from POLICY`) instead of a fresh one.

The actor and its observation normaliser are the pretrained policy's; the critic starts fresh (optionally
warmed up while the actor's learning rate is 0: `Optimizers.make`). Only trainers whose actor is a flow
policy take it (GSB-MDPO, FPO, DPPO: one folder format), and the pretrained spec must be the one this run
would build, field for field, so that what is fine-tuned is exactly what the config describes. run.json
records the source and a hash of the pretrained weights (`provenance`).

How far fine-tuning moves the policy is logged every iteration as `train/path_kl_init` (`path_kl`): the
KL divergence of the actor's generation paths from the pretrained policy's, on the iteration's observations.
"""

import dataclasses
import functools

import jax
import jax.numpy as jnp

from gsbpolicy import FlowPolicy, GSBPolicy, HubRequestError, PolicyFormatError
from gsbpolicy._files import tensors_sha256
from gsbpolicy._internal import policy_tensors, sample_noise

FLAG = "--init-from"

# Where each spec field is set on the command line, for the message that names a mismatch.
_ALGO_FIELDS = ("time_reversed", "clip_iterates", "parameterization")
_ENV_FIELDS = ("obs_dim", "act_dim", "action_low", "action_high", "env_id")


@functools.cache
def load_pretrained(source: str) -> FlowPolicy:
    """The flow policy `source` (a policy folder or Hub repo id) holds; loaded once per process (a seed
    group's seeds and run.json share it). ValueError: it cannot be loaded or is not a flow policy."""
    try:
        policy = GSBPolicy.from_pretrained(source)
    except HubRequestError as err:  # the Hub failed, not the argument: a failure, not a usage error
        raise HubRequestError(f"{FLAG} {source}: {err}") from None
    except (OSError, PolicyFormatError, ValueError) as err:  # missing folder, bad files, Hub errors
        raise ValueError(f"{FLAG} {source}: cannot load it ({err})") from None
    if policy.kind != "flow":
        raise ValueError(f"{FLAG} {source}: a {policy.kind} policy; fine-tuning starts from a flow policy")
    return policy.policy


def weights_sha256(policy: FlowPolicy) -> str:
    """A hash of the weights and observation statistics (independent of file layout and metadata)."""
    return tensors_sha256(policy_tensors(policy))


def _where(field: str) -> str:
    if field in _ALGO_FIELDS:
        return f"--algo.* ({field})"
    if field in _ENV_FIELDS:
        return "--env"
    return f"--policy.{field.replace('_', '-')}"


def spec_differences(pretrained, expected) -> list[str]:
    """'field: pretrained X, this run Y' for every field that differs (the format version aside)."""
    ours, theirs = dataclasses.asdict(expected), dataclasses.asdict(pretrained)
    return [
        f"{name} (set by {_where(name)}): pretrained {theirs[name]!r}, this run {ours[name]!r}"
        for name in ours
        if name != "format_version" and ours[name] != theirs[name]
    ]


def start_actor(actor, init, algo: str):
    """The actor a run starts from: `actor` (freshly made for this run's spec), or with `init.source` the
    pretrained policy, which must have exactly `actor`'s spec. ValueError with a one-line reason otherwise."""
    if init.source is None:
        return actor
    if not isinstance(actor, FlowPolicy):
        raise ValueError(
            f"{FLAG}: {algo} trains a {type(actor).__name__}, not a flow policy; fine-tuning from a "
            "pretrained flow policy is for gsb_mdpo, fpo and dppo"
        )
    pretrained = load_pretrained(init.source)
    if differences := spec_differences(pretrained.spec, actor.spec):
        raise ValueError(
            f"{FLAG} {init.source}: its spec differs from this run's in {'; '.join(differences)}; pass the "
            "pretrained values"
        )
    return pretrained


def refuse(init, algo: str) -> None:
    """For a trainer whose policy is not a flow policy and which does not build its actor through
    `start_actor` (SB3 PPO): `--init-from` is an error, not silently ignored."""
    if init.source is not None:
        raise ValueError(
            f"{FLAG}: {algo} does not start from a pretrained flow policy (gsb_mdpo, fpo and dppo do)"
        )


def provenance(args) -> dict:
    """run.json's record of where the actor started: {"init": {"source", "weights_sha256"}} (empty for a
    fresh actor, and for configs without an `init` group)."""
    init = getattr(args, "init", None)
    if init is None or init.source is None:
        return {}
    return {"init": {"source": init.source, "weights_sha256": weights_sha256(load_pretrained(init.source))}}


PATH_KL_OBSERVATIONS = 256
"""Observations of an iteration's rollout (evenly strided) on which `path_kl` is estimated: enough for a
smooth curve, a small fraction of the update's cost."""


def path_kl(actor: FlowPolicy, reference: FlowPolicy, obs, key) -> jax.Array | None:
    """KL(P_actor || P_reference) between the two policies' generation paths, averaged over `obs` [B, obs_dim]
    (raw observations; each policy applies its own normaliser).

    Paths are drawn from the actor's SDE sampler; each Euler-Maruyama step is a Gaussian of variance
    sigma_n^2 dt in both policies (the spec, so the schedule, is shared), so the path KL is the sum over steps
    of their closed-form KLs, dt ||f_actor - f_reference||^2 / (2 sigma_n^2): the drift energy of the paper's
    eq. 15, as GSB-MDPO's `path_kl_drift` measures it between consecutive policies. None for a noise-free
    sampler (some sigma_n = 0), whose path measures are singular."""
    with jax.ensure_compile_time_eval():
        sigmas = actor.sigmas()
        if not bool(jnp.all(sigmas > 0)):
            return None
    paths = jax.vmap(actor.sample)(obs, sample_noise(key, actor.spec, obs.shape[:1]))
    _, reference_drifts = jax.vmap(reference.log_probs_and_drifts)(obs, paths.path)
    weights = (1.0 / actor.spec.num_steps) / (2.0 * sigmas**2)
    energy = jnp.sum((paths.drifts - reference_drifts) ** 2, axis=-1)  # [B, N]
    return jnp.mean(jnp.sum(weights[None, :] * energy, axis=-1))


def strided(obs, count: int = PATH_KL_OBSERVATIONS):
    """About `count` observations spread evenly over a batch of any leading shape [..., obs_dim]."""
    flat = obs.reshape(-1, obs.shape[-1])
    return flat[:: max(1, flat.shape[0] // count)][:count]
