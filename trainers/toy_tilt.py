"""The paper's toy analysis (appendix "Toy Analysis"): GSB-MDPO reweights a four-mode flow policy toward
the exponential tilt p*(x) proportional to p_old(x) exp(A(x) / beta) (Proposition 3, eq. 14).

1. The old policy: a state-free 2-D flow policy (Euler-Maruyama SDE, exponential sigma schedule) fitted
   to a four-mode Gaussian mixture by discrete Brownian-bridge matching.
2. A quadrant-wise preference A(x), largest in quadrant III; the target quadrant masses are the old
   policy's (estimated by sampling) times exp(A_q / beta), normalised.
3. GSB-MDPO updates: K mirror-descent iterations with lambda = K * beta compose to exactly one tilt by
   exp(A / beta) (P_K proportional to P_0 exp(sum_k A / (K beta))); each iteration samples old paths and
   takes gradient steps on the clipped path-ratio loss (eqs. 19-20) reusing them.

    python -m trainers.toy_tilt [--iterations 2] [--out runs/toy_tilt.png]

Prints the target and learned quadrant masses and their L1 error (the paper reports 0.100).
"""

import dataclasses
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import tyro

from gsbpolicy import FlowPolicy, PolicySpec, make_policy, sample_noise

from .gsb_mdpo import GsbMdpo, GsbMdpoArgs, PathExtras

MODES = np.array([[1.5, 1.5], [-1.5, 1.5], [-1.5, -1.5], [1.5, -1.5]], np.float32)
"""Mixture means, one per quadrant I, II, III, IV."""


@dataclasses.dataclass(frozen=True)
class Args:
    """Toy tilt settings."""

    beta: float = 1.0
    """Temperature of the tilt exp(A / beta)."""
    preference: tuple[float, float, float, float] = (0.0, 0.5, 1.5, 0.5)
    """A(x) on quadrants I, II, III, IV (III largest, as in the paper)."""
    mode_std: float = 0.35
    """Standard deviation of each mixture component."""
    sigma_max: float = 8.0
    """Diffusion coefficient at t = 0 (exponential schedule). Large, so that a^(N) hardly depends on the
    prior draw a^(0): the policy cannot reweight its fixed prior, so only a tilt of a^(0:N) given a^(0)
    is reachable, and the closer a^(N) is to independent of a^(0), the closer that is to p*."""
    sigma_min: float = 0.3
    """Diffusion coefficient at t = 1."""
    num_steps: int = 16
    """Generation steps."""
    width: int = 128
    """Drift MLP width."""
    depth: int = 3
    """Drift MLP hidden layers."""
    pretrain_steps: int = 8000
    """Bridge-matching steps for the old policy."""
    iterations: int = 2
    """Mirror-descent iterations K (lambda = K * beta each)."""
    updates_per_iteration: int = 300
    """Gradient steps per iteration, each on a minibatch of the iteration's stored old paths."""
    paths_per_iteration: int = 16384
    """Old paths sampled per iteration."""
    minibatch: int = 4096
    """Paths per gradient step."""
    lr: float = 3e-3
    """Adam learning rate of the GSB-MDPO updates."""
    step_clip: float = 0.5
    """c_step (eq. 19)."""
    path_clip: float = 1.0
    """c_path (eq. 19)."""
    eval_samples: int = 200_000
    """Samples used to estimate quadrant masses."""
    seed: int = 0
    """Random seed."""
    out: Path | None = Path("runs/toy_tilt.png")
    """Where to write the figure (None: no figure)."""


def quadrant(x: jax.Array) -> jax.Array:
    """Quadrant index 0..3 (I, II, III, IV) of each point [..., 2]."""
    right, up = x[..., 0] >= 0, x[..., 1] >= 0
    return jnp.where(up, jnp.where(right, 0, 1), jnp.where(right, 3, 2))


def masses(x: jax.Array) -> np.ndarray:
    return np.bincount(np.asarray(quadrant(x)), minlength=4) / x.shape[0]


def sample_terminal(policy: FlowPolicy, key, n: int) -> jax.Array:
    obs = jnp.zeros((n, 1))
    return jax.vmap(policy.sample)(obs, sample_noise(key, policy.spec, (n,))).path[:, -1]


def pretrain_old_policy(args: Args, key) -> FlowPolicy:
    """Discrete Brownian-bridge matching: along Gaussian random walks with the sampler's own step
    variances s_n = sigma(t_n)^2 dt, from x0 ~ N(0, I) pinned at x1 ~ mixture, regress the drift on the
    bridge's mean increment s_n (x1 - a_n) / ((nu_N - nu_n) dt), nu_n = sum_{m<n} s_m. The Markov chain
    with that drift has (up to the last step's noise) the mixture as its a^(N) marginal, and the large
    early noise makes a^(N) nearly independent of a^(0), which the policy cannot reweight."""
    spec = PolicySpec(obs_dim=1, act_dim=2, num_steps=args.num_steps, width=args.width, depth=args.depth,
                      time_embed_dim=16, output_scale=1.0, sigma_schedule="exponential",
                      sigma_max=args.sigma_max, sigma_min=args.sigma_min, squash="none")  # fmt: skip
    init_key, key = jax.random.split(key)
    policy = make_policy(spec, key=init_key)
    dt = 1.0 / args.num_steps
    step_var = policy.sigmas() ** 2 * dt
    nu = jnp.concatenate([jnp.zeros(1), jnp.cumsum(step_var)])  # nu_0..nu_N
    optimizer = optax.adam(1e-3)  # pretraining has its own, fixed rate
    params, static = eqx.partition(policy, eqx.is_inexact_array)
    opt_state = optimizer.init(params)

    def loss(params, key):
        policy = eqx.combine(params, static)
        k0, k1, km, kn, kb = jax.random.split(key, 5)
        n_samples = 1024
        x0 = jax.random.normal(k0, (n_samples, 2))
        modes = jnp.asarray(MODES)[jax.random.randint(km, (n_samples,), 0, 4)]
        x1 = modes + args.mode_std * jax.random.normal(k1, (n_samples, 2))
        n = jax.random.randint(kn, (n_samples,), 0, args.num_steps)
        w = (nu[n] / nu[-1])[:, None]
        bridge_std = jnp.sqrt(nu[n] * (nu[-1] - nu[n]) / nu[-1])[:, None]
        an = x0 + w * (x1 - x0) + bridge_std * jax.random.normal(kb, (n_samples, 2))
        remaining = (nu[-1] - nu[n])[:, None]
        target = step_var[n][:, None] * (x1 - an) / (remaining * dt)
        pred = jax.vmap(policy.drift)(jnp.zeros((n_samples, 1)), an, n / args.num_steps)
        # Weighted by the remaining variance so the near-deterministic last steps do not dominate.
        return jnp.mean(jnp.sum((pred - target) ** 2, -1) * remaining[:, 0])

    @eqx.filter_jit
    def step(params, opt_state, key):
        grads = jax.grad(loss)(params, key)
        updates, opt_state = optimizer.update(grads, opt_state)
        return eqx.apply_updates(params, updates), opt_state

    for k in jax.random.split(key, args.pretrain_steps):
        params, opt_state = step(params, opt_state, k)
    return eqx.combine(params, static)


def gsb_mdpo_updates(policy: FlowPolicy, args: Args, key) -> FlowPolicy:
    """K GSB-MDPO iterations with the advantage A(x) of the terminal action (no critic needed)."""
    algo = GsbMdpo(GsbMdpoArgs(kl_coef=args.iterations * args.beta, ref_mix=0.0,
                               step_clip=args.step_clip, path_clip=args.path_clip))  # fmt: skip
    preference = jnp.asarray(args.preference)
    optimizer = optax.adam(args.lr)
    params, static = eqx.partition(policy, eqx.is_inexact_array)
    opt_state = optimizer.init(params)

    @eqx.filter_jit
    def collect(params, key):
        policy = eqx.combine(params, static)
        obs = jnp.zeros((args.paths_per_iteration, 1))
        sample = jax.vmap(policy.sample)(obs, sample_noise(key, policy.spec, obs.shape[:1]))
        advantages = preference[quadrant(sample.path[:, -1])]
        return obs, PathExtras(*sample), advantages - advantages.mean()  # a baseline; no rescaling

    @eqx.filter_jit
    def update(params, opt_state, obs, extras, advantages, key):
        idx = jax.random.choice(key, obs.shape[0], (args.minibatch,), replace=False)
        batch = jax.tree.map(lambda x: x[idx], (obs, extras, advantages))
        grads = jax.grad(lambda p: algo.actor_loss(eqx.combine(p, static), *batch, key)[0])(params)
        updates, opt_state = optimizer.update(grads, opt_state)
        return eqx.apply_updates(params, updates), opt_state

    for iteration_key in jax.random.split(key, args.iterations):
        collect_key, update_key = jax.random.split(iteration_key)
        obs, extras, advantages = collect(params, collect_key)
        for k in jax.random.split(update_key, args.updates_per_iteration):
            params, opt_state = update(params, opt_state, obs, extras, advantages, k)
    return eqx.combine(params, static)


def run(args: Args) -> dict:
    """The whole analysis; returns old, target and learned quadrant masses and the L1 error."""
    pre_key, old_key, update_key, new_key = jax.random.split(jax.random.key(args.seed), 4)
    old = pretrain_old_policy(args, pre_key)
    old_x = sample_terminal(old, old_key, args.eval_samples)
    old_masses = masses(old_x)
    tilt = np.exp(np.asarray(args.preference) / args.beta)
    target = old_masses * tilt / np.sum(old_masses * tilt)
    new = gsb_mdpo_updates(old, args, update_key)
    new_x = sample_terminal(new, new_key, args.eval_samples)
    learned = masses(new_x)
    result = {
        "old": old_masses,
        "target": target,
        "learned": learned,
        "l1": float(np.abs(learned - target).sum()),
    }
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


def main() -> None:
    args = tyro.cli(Args, description=__doc__)
    result = run(args)
    names = ("QI", "QII", "QIII", "QIV")
    print(f"{'':8s}" + "".join(f"{n:>8s}" for n in names))
    for row in ("old", "target", "learned"):
        print(f"{row:8s}" + "".join(f"{v:8.3f}" for v in result[row]))
    print(f"quadrant-mass L1 error: {result['l1']:.3f} (paper: 0.100)")
    if args.out is not None:
        print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
