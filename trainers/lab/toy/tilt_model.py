"""The toy problem and the paper's update on it: a state-free 2-D flow policy (Euler-Maruyama SDE, exponential
sigma schedule) fitted to a four-mode Gaussian mixture by bridge matching is the old policy; K GSB-MDPO
mirror-descent iterations (lambda = K beta, eqs. 19-20), each fed a quadrant-wise advantage of the terminal
action, tilt it toward p* proportional to p_old exp(A / beta) (Proposition 3, eq. 14). `run` is one analysis:
the old, target and learned quadrant masses and their L1 error."""

import functools
import hashlib
import json
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from gsbpolicy import FlowPolicy, PolicySpec, load_policy, make_policy, save_policy
from gsbpolicy._internal import sample_noise
from trainers._core.bridge_matching import bridge_matching_loss, fit
from trainers.gsb_mdpo import GsbMdpo, GsbMdpoArgs, PathExtras

from .tilt_settings import PRETRAIN_FIELDS, Args

MODES = np.array([[1.5, 1.5], [-1.5, 1.5], [-1.5, -1.5], [1.5, -1.5]], np.float32)
"""Mixture means, one per quadrant I, II, III, IV."""


class Clock:
    """Elapsed wall time for progress lines."""

    def __init__(self):
        self.start = time.perf_counter()

    def __call__(self) -> str:
        return f"[{time.perf_counter() - self.start:6.0f} s]"


def quadrant(x: jax.Array) -> jax.Array:
    """Quadrant index 0..3 (I, II, III, IV) of each point [..., 2]."""
    right, up = x[..., 0] >= 0, x[..., 1] >= 0
    return jnp.where(up, jnp.where(right, 0, 1), jnp.where(right, 3, 2))


def masses(x: jax.Array) -> np.ndarray:
    """The share of points [n, 2] in each quadrant I..IV."""
    return np.bincount(np.asarray(quadrant(x)), minlength=4) / x.shape[0]


@eqx.filter_jit
def _terminal(policy: FlowPolicy, noise) -> jax.Array:
    """The terminal actions a^(N) of the state-free policy, one per row of `noise`."""
    return jax.vmap(policy.sample_final)(jnp.zeros((noise.shape[0], 1)), noise)


def sample_terminal(policy: FlowPolicy, key, n: int) -> jax.Array:
    """n terminal actions a^(N), drawn in chunks so memory stays small."""
    chunk = 50_000
    keys = jax.random.split(key, -(-n // chunk))
    return jnp.concatenate([_terminal(policy, sample_noise(k, policy.spec, (chunk,))) for k in keys])[:n]


def prior_limited_masses(policy: FlowPolicy, tilt: np.ndarray, key, priors: int = 32, paths: int = 1024):
    """Quadrant masses of the exact path tilt under the fixed prior (the policy cannot reweight a^(0)): for
    each of `priors` draws of a^(0), the old policy's quadrant masses given that draw, tilted and
    normalised, then averaged. Equals the target when a^(N) is independent of a^(0); the gap between the
    two is what an update that tilts every path as p* does would still miss. The target-mass feedback
    extension aims at the quadrant masses themselves, so it can tilt more given some draws to make up for
    others, and is not bound by this gap."""
    noise = sample_noise(key, policy.spec, (priors, paths))
    noise = noise.at[:, :, 0].set(jnp.broadcast_to(noise[:, :1, 0], noise[:, :, 0].shape))  # a^(0) per group
    x = _terminal(policy, noise.reshape(priors * paths, *noise.shape[2:])).reshape(priors, paths, 2)
    given_prior = np.stack([masses(group) for group in x]) * tilt
    return np.mean(given_prior / given_prior.sum(-1, keepdims=True), axis=0)


def policy_spec(args: Args) -> PolicySpec:
    """The flow policy of the toy: a 2-D action, a dummy 1-D observation, an exponential sigma schedule."""
    return PolicySpec(
        obs_dim=1,
        act_dim=2,
        num_steps=args.num_steps,
        width=args.width,
        depth=args.depth,
        time_embed_dim=16,
        output_scale=1.0,
        sigma_schedule="exponential",
        sigma_max=args.sigma_max,
        sigma_min=args.sigma_min,
        squash="none",
    )


def pretrain_old_policy(args: Args, key, clock: Clock | None = None) -> FlowPolicy:
    """Bridge matching (`trainers._core.bridge_matching`) from x0 ~ N(0, I) to x1 ~ mixture: the large early
    noise makes a^(N) nearly independent of a^(0), which the policy cannot reweight."""
    init_key, key = jax.random.split(key)
    policy = make_policy(policy_spec(args), key=init_key)
    n_samples = 1024

    def loss(policy, _data, key):
        k0, k1, km, kn, kb = jax.random.split(key, 5)
        x0 = jax.random.normal(k0, (n_samples, 2))
        modes = jnp.asarray(MODES)[jax.random.randint(km, (n_samples,), 0, 4)]
        x1 = modes + args.mode_std * jax.random.normal(k1, (n_samples, 2))
        n = jax.random.randint(kn, (n_samples,), 0, args.num_steps)
        z = jax.random.normal(kb, (n_samples, 2))
        return bridge_matching_loss(policy, jnp.zeros((n_samples, 1)), x0, x1, n, z)

    def progress(done: int, _loss: float) -> None:
        if clock is not None:
            print(f"{clock()} pretraining the old policy: step {done}/{args.pretrain_steps}", flush=True)

    return fit(policy, loss, None, args.pretrain_steps, key, on_chunk=progress)  # its own, fixed rate


def old_policy(args: Args, key, clock: Clock | None = None) -> tuple[FlowPolicy, bool]:
    """The pretrained old policy for `args`' pretraining settings and seed, and whether it came from the
    cache."""
    if args.cache_dir is None:
        return pretrain_old_policy(args, key, clock), False
    setting = {k: getattr(args, k) for k in PRETRAIN_FIELDS} | {"seed": args.seed}
    digest = hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()[:12]
    directory = args.cache_dir / f"old_seed{args.seed}_{digest}"
    if (directory / "model.safetensors").is_file():
        if clock is not None:
            print(f"{clock()} old policy from {directory}", flush=True)
        return load_policy(directory), True
    policy = pretrain_old_policy(args, key, clock)
    save_policy(policy, directory)
    return policy, False


@functools.cache
def _adam(lr: float) -> optax.GradientTransformation:
    return optax.adam(lr)  # one object per rate, so the jitted update is compiled once per rate


@eqx.filter_jit
def _collect(policy: FlowPolicy, quadrant_advantage, key, n: int):
    obs = jnp.zeros((n, 1))
    sample = jax.vmap(policy.sample)(obs, sample_noise(key, policy.spec, (n,)))
    advantages = quadrant_advantage[quadrant(sample.path[:, -1])]
    return obs, PathExtras(*sample), advantages - advantages.mean()  # a baseline; no rescaling


@eqx.filter_jit
def _update(
    params, static, opt_state, data, minibatch: int, kl_coef, clips: tuple[float, float], lr: float, key
):
    idx = jax.random.choice(key, data[0].shape[0], (minibatch,), replace=False)
    batch = jax.tree.map(lambda x: x[idx], data)
    # The algorithm is built inside the jitted function so that kl_coef (K beta) is traced: every beta
    # of a sweep reuses one compilation.
    algo = GsbMdpo(GsbMdpoArgs(kl_coef=kl_coef, ref_mix=0.0, step_clip=clips[0], path_clip=clips[1]))
    (_, metrics), grads = jax.value_and_grad(
        lambda p: algo.actor_loss(eqx.combine(p, static), *batch, key), has_aux=True
    )(params)
    updates, opt_state = _adam(lr).update(grads, opt_state)
    return eqx.apply_updates(params, updates), opt_state, metrics


def tilt_path_advantage(preference, lam: float, path_start, now, iteration: int) -> np.ndarray:
    """The quadrant-wise advantage whose tilt exp(advantage / lam) takes masses `now` to the point
    path_start exp((iteration + 1) A / lam) of the tilt path (iteration counts from 0). Up to a constant, which
    the baseline removes, it is A when `now` is where the earlier iterations aimed (path_start exp(iteration A /
    lam)), and it adds lam times the log-mass each quadrant fell short of that."""
    aim = np.asarray(path_start) * np.exp((iteration + 1) * np.asarray(preference) / lam)
    return lam * (np.log(aim / aim.sum()) - np.log(now))


def gsb_mdpo_updates(policy: FlowPolicy, args: Args, key, clock: Clock | None = None):
    """K GSB-MDPO iterations with a quadrant-wise advantage of the terminal action (no critic needed): the
    paper's A, or with `args.target_mass_feedback` (the extension) the advantage that aims at the next point of the tilt path
    from the masses the policy has. The path starts from the masses of the policy given, estimated on a
    sample of its own: not the one the evaluation's target comes from, so that the extension is not
    steered toward that estimate's sampling error.

    Returns the updated policy and, per iteration, the quadrant masses of its old paths, the masses it
    aimed at (those masses tilted by exp(advantage / lambda)) and the last update's clip fractions."""
    preference = np.asarray(args.preference, np.float64)
    lam = args.iterations * args.beta
    kl_coef, clips = jnp.float32(lam), (args.step_clip, args.path_clip)
    params, static = eqx.partition(policy, eqx.is_inexact_array)
    opt_state = _adam(args.lr).init(params)
    history, path_start = [], None
    for iteration, iteration_key in enumerate(jax.random.split(key, args.iterations)):
        collect_key, update_key = jax.random.split(iteration_key)
        current = eqx.combine(params, static)
        if args.target_mass_feedback:
            # Masses from a large fresh sample: the aim's error is the error of these estimates.
            masses_key = jax.random.fold_in(iteration_key, 1)  # the paper's update's keys stay as they are
            now = masses(sample_terminal(current, masses_key, args.eval_samples))
            now = np.maximum(now, 1 / args.eval_samples)
            path_start = now if path_start is None else path_start
            advantage = tilt_path_advantage(preference, lam, path_start, now, iteration)
        else:
            advantage = preference
        data = _collect(current, jnp.asarray(advantage, jnp.float32), collect_key, args.paths_per_iteration)
        start = masses(data[1].path[:, -1])
        tilt = start * np.exp(advantage / lam)
        for k in jax.random.split(update_key, args.updates_per_iteration):
            params, opt_state, metrics = _update(
                params, static, opt_state, data, args.minibatch, kl_coef, clips, args.lr, k
            )
        record = {
            "old": start.tolist(),
            "target": (tilt / tilt.sum()).tolist(),
            "step_clip_frac": float(metrics["step_clip_frac"]),
            "path_clip_frac": float(metrics["path_clip_frac"]),
        }
        history.append(record)
        if clock is not None:
            print(
                f"{clock()} iteration {iteration + 1}/{args.iterations}: masses {_fmt(start)} -> aiming at "
                f"{_fmt(record['target'])}; last update clips {record['path_clip_frac']:.2f} of paths, "
                f"{record['step_clip_frac']:.2f} of steps",
                flush=True,
            )
    return eqx.combine(params, static), history


def _fmt(values) -> str:
    """Quadrant masses for a progress line."""
    return "[" + " ".join(f"{v:.3f}" for v in values) + "]"


def run(args: Args, clock: Clock | None = None) -> dict:
    """The whole analysis; returns old, target and learned quadrant masses, the L1 error, per
    mirror-descent iteration the masses it started from and aimed at, and the seconds spent pretraining
    (0 when the old policy came from the cache). Progress lines are printed when a clock is given."""
    pre_key, old_key, update_key, new_key = jax.random.split(jax.random.key(args.seed), 4)
    start = time.perf_counter()
    old, cached = old_policy(args, pre_key, clock)
    pretrain_seconds = 0.0 if cached else time.perf_counter() - start
    old_x = sample_terminal(old, old_key, args.eval_samples)
    old_masses = masses(old_x)
    tilt = np.exp(np.asarray(args.preference) / args.beta)
    target = old_masses * tilt / np.sum(old_masses * tilt)
    floor_key, update_key = jax.random.split(update_key)
    reachable = prior_limited_masses(old, tilt, floor_key)
    if clock is not None:  # the first iteration also compiles the update: the longest silence otherwise
        print(
            f"{clock()} mirror descent: {args.iterations} iterations of {args.updates_per_iteration} updates "
            f"on {args.paths_per_iteration} paths each ...",
            flush=True,
        )
    new, history = gsb_mdpo_updates(old, args, update_key, clock)
    new_x = sample_terminal(new, new_key, args.eval_samples)
    learned = masses(new_x)
    result = {
        "old": old_masses,
        "target": target,
        "learned": learned,
        "l1": float(np.abs(learned - target).sum()),
        "prior_floor_l1": float(np.abs(reachable - target).sum()),
        "iterations": history,
        "pretrain_seconds": round(pretrain_seconds, 1),
    }
    if clock is not None:
        print(f"{clock()} evaluated on {args.eval_samples} samples: L1 {result['l1']:.3f}", flush=True)
    if args.out is not None:
        plot(args, old_x, new_x, tilt, result)
    return result


def plot(args: Args, old_x, new_x, tilt, result) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    old_x, new_x = np.asarray(old_x), np.asarray(new_x)
    bins = np.linspace(-3.5, 3.5, 120)
    target_weights = tilt[np.asarray(quadrant(old_x))]
    fig, axes = plt.subplots(1, 4, figsize=(16, 4))
    axes[0].hist2d(*old_x.T, bins=bins, cmap="viridis")
    axes[0].set_title("old policy $p_{old}$")
    grid = np.stack(np.meshgrid(bins, bins), -1)
    axes[1].imshow(
        tilt[np.asarray(quadrant(grid))], origin="lower", extent=(-3.5, 3.5, -3.5, 3.5), cmap="magma"
    )
    axes[1].set_title(r"preference weights $\exp(A/\beta)$")
    axes[2].hist2d(*old_x.T, bins=bins, weights=target_weights, cmap="viridis")
    axes[2].set_title(r"target $p^* \propto p_{old}\exp(A/\beta)$")
    axes[3].hist2d(*new_x.T, bins=bins, cmap="viridis")
    axes[3].set_title(f"learned $p_\\theta$ (quadrant L1 = {result['l1']:.3f})")
    for ax in axes:
        ax.set_aspect("equal")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=80)
    plt.close(fig)
