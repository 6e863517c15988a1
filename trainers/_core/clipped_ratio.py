"""PPO's clipped surrogate and the ratio diagnostics that every likelihood-ratio baseline logs.

DPPO, FPO, FPO++, GenPO and Gaussian PPO each form a ratio of new to old policy (of a generation step, of a CFM
surrogate, of a flow's exact density, of a Gaussian's) and then treat it as PPO does; this is that shared part.
"""

import jax.numpy as jnp


def clipped_surrogate(ratio, advantages, clip: float):
    """min(r A, clip(r, 1 - eps, 1 + eps) A) per sample: PPO's clipped objective, to be maximised."""
    return jnp.minimum(ratio * advantages, jnp.clip(ratio, 1.0 - clip, 1.0 + clip) * advantages)


def ratio_metrics(ratio, log_ratio, clip: float) -> dict:
    """The ratio's mean and max, the share of it outside [1 - eps, 1 + eps] (SB3's `clip_fraction`) and the k3
    estimate of KL(old || new) from the unclipped log-ratio, E[(r - 1) - log r] (SB3's `approx_kl`)."""
    return {
        "ratio_mean": jnp.mean(ratio),
        "ratio_max": jnp.max(ratio),
        "clip_frac": jnp.mean(jnp.abs(ratio - 1.0) > clip),
        "approx_kl": jnp.mean(jnp.expm1(log_ratio) - log_ratio),
    }
