"""Numpy re-implementations of the peer references the FPO and DPPO tests check against.

They read a `FlowPolicy`'s weights and recompute everything in float64 in the peers' own conventions
(FPO's tau = 1 noise -> tau = 0 action, DPPO's DDPM index k), so they share no code with gsbpolicy.
"""

import numpy as np

LOG_2PI = np.log(2 * np.pi)
ACTIVATIONS = {"silu": lambda x: x / (1 + np.exp(-x)), "elu": lambda x: np.where(x > 0, x, np.expm1(x))}


def net(policy, obs, x, time):
    """output_scale * MLP([normalize(obs), x, [cos(2^k time), sin(2^k time)]]) (the raw network output)."""
    spec, norm = policy.spec, policy.normalizer
    obs_n = (obs - np.asarray(norm.mean, np.float64)) / np.sqrt(np.asarray(norm.var, np.float64) + norm.eps)
    obs_n = np.clip(obs_n, -norm.clip, norm.clip)
    freqs = 2.0 ** np.arange(spec.time_embed_dim // 2)
    h = np.concatenate([obs_n, x, np.cos(freqs * time), np.sin(freqs * time)])
    layers = policy.drift_net.mlp.layers
    for i, layer in enumerate(layers):
        h = np.asarray(layer.weight, np.float64) @ h + np.asarray(layer.bias, np.float64)
        if i < len(layers) - 1:
            h = ACTIVATIONS[spec.activation](h)
    return spec.output_scale * h


def fpo_velocity(policy, obs, x, tau):
    """The FPO reference's v_hat(x, tau) ~ eps - a; our network is its negation fed tau = 1 - t."""
    return -net(policy, obs, x, tau)


def fpo_euler(policy, obs, x1, steps, clip=False):
    """The reference sampler: tau_k = 1 - k/steps, x <- x - v_hat(x, tau_k) / steps (optional clip)."""
    x = np.asarray(x1, np.float64)
    for k in range(steps):
        x = x - fpo_velocity(policy, obs, x, 1 - k / steps) / steps
        x = np.clip(x, -1, 1) if clip else x
    return x


def fpo_cfm_loss(policy, obs, action, eps, tau):
    """'u_but_supervise_as_eps': eps_hat = x_tau + (1 - tau) v_hat, loss mean_dims (eps - eps_hat)^2."""
    x_tau = tau * eps + (1 - tau) * action
    eps_hat = x_tau + (1 - tau) * fpo_velocity(policy, obs, x_tau, tau)
    return np.mean((eps - eps_hat) ** 2)


def gaussian_log_prob(x, mean, std):
    """log N(x; mean, std^2 I) per dimension."""
    return -0.5 * ((x - mean) / std) ** 2 - np.log(std) - 0.5 * LOG_2PI


def ddpm_posterior(policy, obs, x, k, min_std=0.1):
    """DPPO's p(x_{k-1} | x_k): mean with x0_hat clipped to +-1 and the floored posterior std."""
    K = policy.spec.num_steps
    grid = np.linspace(0, K + 1, K + 1) / (K + 1)
    alpha_bar = np.cos((grid + 0.008) / 1.008 * np.pi / 2) ** 2
    alpha_bar = alpha_bar / alpha_bar[0]
    betas = np.clip(1 - alpha_bar[1:] / alpha_bar[:-1], 0, 0.999)
    ab = np.cumprod(1 - betas)
    ab_prev = 1.0 if k == 0 else ab[k - 1]
    eps_hat = net(policy, obs, x, (k + 1) / K)  # time_reversed: t_n = (K - 1 - k) / K is fed as 1 - t_n
    x0 = np.clip((x - np.sqrt(1 - ab[k]) * eps_hat) / np.sqrt(ab[k]), -1, 1)
    mean = (betas[k] * np.sqrt(ab_prev) * x0 + (1 - ab_prev) * np.sqrt(1 - betas[k]) * x) / (1 - ab[k])
    std = max(np.sqrt(max(betas[k] * (1 - ab_prev) / (1 - ab[k]), 1e-20)), min_std)
    return mean, std
