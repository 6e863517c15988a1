"""The paper's toy analysis (appendix "Toy Analysis"): GSB-MDPO reweights a four-mode flow policy toward
the exponential tilt p*(x) proportional to p_old(x) exp(A(x) / beta) (Proposition 3, eq. 14).

1. The old policy: a state-free 2-D flow policy (Euler-Maruyama SDE, exponential sigma schedule) fitted
   to a four-mode Gaussian mixture by discrete Brownian-bridge matching.
2. A quadrant-wise preference A(x), largest in quadrant III; the target quadrant masses are the old
   policy's (estimated by sampling) times exp(A_q / beta), normalised.
3. GSB-MDPO updates, as the paper states them: K mirror-descent iterations with lambda = K * beta, whose tilts
   exp(A / lambda) compose to exactly one tilt by exp(A / beta) (P_K proportional to P_0 exp(sum_k A / (K beta)));
   each iteration samples old paths, is fed the advantage A of their terminal actions and takes gradient steps
   on the clipped path-ratio loss (eqs. 19-20) reusing them. This is the default, and the reproduction.

    python -m trainers.lab.toy [--beta 0.5] [--preference 1.5 0.5 0 0.5] [--out runs/toy_tilt.png]
    python -m trainers.lab.toy --sweep   # beta x preferred quadrant x seed; resumable

Prints the target and learned quadrant masses and their L1 error (the paper reports 0.100). The sweep
writes hub_cards/results/toy_tilt_sweep.json and its documentation page docs/benchmarks/toy_tilt_sweep.md from the
run log hub_cards/results/raw/toy_tilt_sweep.jsonl;
each progress line of an iteration shows the masses it starts from and the masses it aims at, so the next
line shows how far it got.

What limits the tilt (every run is in the sweep's log; its summary gives each setting's mean L1 and coverage,
the share of its own aim an iteration realised):
- One iteration falls short of its tilt whatever its optimizer: about 0.82 of it with these settings, 0.74-0.86
  in every setting measured. The cause is the policy class. A drift change only shifts the mean of each
  Gaussian step (the prior a^(0) and the step variances are fixed), so it can tilt the law of the paths only by
  functions linear in each step's noise. `trainers.experiments.toy_reachable` measures, under the old policy,
  the share of Var(A) that such tilts reach to first order: about 0.85 (coarser steps: less); the rest is the
  fixed prior (about 1%) and the part of each step that is nonlinear in its noise.
- So the paper's update, each iteration fed A, compounds the shortfalls: the policy ends at about
  p_old exp(0.8 A / beta), and the sharper the tilt the larger the error. No optimizer setting moves this:
  more or fewer updates, rates, widths, minibatches, paths per iteration and generation steps were measured
  (the sweep summary's "Other settings measured"); K = 2 or 4 is worse (a large tilt also runs into the path
  clip, and then the sample objective is exploited: with c_path = 3, 87% of paths end beyond the clip and the
  masses overshoot).

An extension, not the paper's algorithm (`--target-mass-feedback`): iteration k is fed lambda log(aim / masses)
per quadrant (`tilt_path_advantage`), where the masses are the current policy's quadrant masses measured on a
fresh sample and the aim is the point p_old exp(k A / (K beta)) of the target's tilt path. That uses target
information the paper's update does not have (the quadrant masses, which here are the whole of what the tilt
changes, and where the target puts them), so it is a controller steering toward the target, not GSB-MDPO: it
carries what one iteration cannot reach into the next aim, and its L1 error is far below the paper's. The
update, its clips and its KL weight are unchanged. The sweep table gives the paper's algorithm as the
reproduction and the extension in its own, labelled row.
"""

import dataclasses
import datetime
import functools
import hashlib
import json
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from gsbpolicy import FlowPolicy, PolicyFormatError, PolicySpec, load_policy, make_policy, save_policy
from gsbpolicy._cli import FAILURE, USAGE
from gsbpolicy._files import atomic_write_text
from gsbpolicy._internal import sample_noise
from trainers._core.bridge_matching import bridge_matching_loss, fit
from trainers._core.cli import fail, tyro_cli
from trainers._core.runlog import git_commit, read_jsonl
from trainers.benchmark.aggregate import pages_dir
from trainers.gsb_mdpo import GsbMdpo, GsbMdpoArgs, PathExtras

MODES = np.array([[1.5, 1.5], [-1.5, 1.5], [-1.5, -1.5], [1.5, -1.5]], np.float32)
"""Mixture means, one per quadrant I, II, III, IV."""
QUADRANTS = ("I", "II", "III", "IV")
COMMAND = "python -m trainers.lab.toy"
"""How the toy is run (the sweep's page and summary name it)."""
PAPER_PREFERENCE = (0.0, 0.5, 1.5, 0.5)
"""The paper's A(x) on quadrants I..IV: III preferred, its neighbours half as much, I not at all."""


@dataclasses.dataclass(frozen=True)
class Args:
    """Toy tilt settings."""

    beta: float = 1.0
    """Temperature of the tilt exp(A / beta)."""
    preference: tuple[float, float, float, float] = PAPER_PREFERENCE
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
    iterations: int = 8
    """Mirror-descent iterations K (lambda = K * beta each). Many small tilts: each iteration falls short
    of its own tilt, and a large one (sharp beta, small K) also runs into the path clip."""
    target_mass_feedback: bool = False
    """Extension, not the paper's algorithm: feed iteration k (of K) the quadrant-wise advantage
    lambda log(aim / masses), where `masses` are the current policy's quadrant masses measured on a fresh sample
    and `aim` is the point p_old exp(k A / (K beta)) of the target's tilt path. It uses target information the
    paper's update does not have (the quadrant masses and where the target puts them): a controller toward the
    target, whose error is not the paper's algorithm's. False (the default): the paper's update, every
    iteration fed the advantage A."""
    updates_per_iteration: int = 150
    """Gradient steps per iteration, each on a minibatch of the iteration's stored old paths (300 gave
    no better iterations than 150)."""
    paths_per_iteration: int = 8192
    """Old paths sampled per iteration."""
    minibatch: int = 256
    """Paths per gradient step."""
    lr: float = 1e-2
    """Adam learning rate of the GSB-MDPO updates."""
    step_clip: float = 0.5
    """c_step (eq. 19)."""
    path_clip: float = 1.0
    """c_path (eq. 19)."""
    eval_samples: int = 50_000
    """Samples used to estimate quadrant masses (standard error about 0.002 per quadrant)."""
    seed: int = 0
    """Random seed."""
    out: Path | None = Path("runs/toy_tilt.png")
    """Where to write the figure (None: no figure)."""
    cache_dir: Path | None = Path("runs/toy_tilt_cache")
    """Where pretrained old policies are kept (one per seed and pretraining setting), so that reruns and
    the sweep pretrain each seed once (None: always pretrain)."""
    sweep: bool = False
    """Instead of one run, sweep sweep_betas x each quadrant preferred in turn (the preference rotated)
    x sweep_seeds; runs already in the run log are skipped, so an interrupted sweep resumes."""
    sweep_betas: tuple[float, ...] = (0.5, 1.0, 2.0)
    """Temperatures of the sweep."""
    sweep_quadrants: tuple[int, ...] = (1, 2, 3, 4)
    """Preferred quadrants of the sweep (1..4 for I..IV)."""
    sweep_seeds: tuple[int, ...] = (0, 1, 2)
    """Seeds of the sweep."""
    rerun: bool = False
    """With --sweep: run the selected cells again even when the log has them under these settings (the new
    record supersedes the old: a cell reproduced at the current commit)."""
    results_dir: Path = Path("hub_cards/results")
    """Where the sweep writes toy_tilt_sweep.json and its run log raw/toy_tilt_sweep.jsonl (its page goes to the
    documentation for the committed results, beside them otherwise)."""


RUN_FIELDS = ("beta", "preference", "seed")
"""What one sweep cell varies; every other result-affecting field is a setting."""
OUTPUT_FIELDS = ("out", "cache_dir", "sweep", "sweep_betas", "sweep_quadrants", "sweep_seeds", "rerun",
                 "results_dir")  # fmt: skip
LEGACY_SETTINGS = {"track_tilt_path": "target_mass_feedback"}
"""Settings renamed since runs were logged under the old name (same meaning), read under the new name."""
PRETRAIN_FIELDS = ("mode_std", "sigma_max", "sigma_min", "num_steps", "width", "depth", "pretrain_steps")


def settings(args: Args) -> dict:
    """The fields that change a run's result other than its beta, preference and seed."""
    fields = dataclasses.asdict(args)
    return {k: v for k, v in fields.items() if k not in RUN_FIELDS + OUTPUT_FIELDS}


def rotate_preference(preference, quadrant_number: int) -> tuple[float, ...]:
    """`preference` rotated (I -> II -> III -> IV -> I) so that its largest entry lands on quadrant
    `quadrant_number` (1..4)."""
    shift = (quadrant_number - 1) - int(np.argmax(preference))
    return tuple(float(v) for v in np.roll(np.asarray(preference, float), shift))


def preferred_quadrant(preference) -> str:
    return QUADRANTS[int(np.argmax(preference))]


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
    return np.bincount(np.asarray(quadrant(x)), minlength=4) / x.shape[0]


@eqx.filter_jit
def _terminal(policy: FlowPolicy, noise) -> jax.Array:
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
    return PolicySpec(obs_dim=1, act_dim=2, num_steps=args.num_steps, width=args.width, depth=args.depth,
                      time_embed_dim=16, output_scale=1.0, sigma_schedule="exponential",
                      sigma_max=args.sigma_max, sigma_min=args.sigma_min, squash="none")  # fmt: skip


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
    kl_coef = jnp.float32(lam)
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
            params, opt_state, metrics = _update(params, static, opt_state, data, args.minibatch, kl_coef,
                                                 (args.step_clip, args.path_clip), args.lr, k)  # fmt: skip
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


def sweep_log_path(args: Args) -> Path:
    return args.results_dir / "raw" / "toy_tilt_sweep.jsonl"


def reachable_log_path(results_dir: Path) -> Path:
    """Where `trainers.experiments.toy_reachable` keeps its measurements."""
    return results_dir / "raw" / "toy_tilt_reachable.jsonl"


def coverage(record: dict) -> float | None:
    """The share of its own tilt an iteration realised, averaged over a run's iterations (None without
    any): the change of the centred log quadrant masses from one iteration's start to the next (the learned
    masses after the last), projected on the change its tilt exp(A / lambda) aimed at."""
    if not record["iterations"]:
        return None
    starts = [np.log(it["old"]) for it in record["iterations"]] + [np.log(record["learned"])]
    shares = []
    for it, start, end in zip(record["iterations"], starts, starts[1:], strict=False):
        aim = np.log(it["target"]) - start
        moved = end - start
        aim, moved = aim - aim.mean(), moved - moved.mean()
        shares.append(float(moved @ aim / (aim @ aim)))
    return float(np.mean(shares))


def tilted_l1(record: dict, share: float) -> float:
    """The L1 error the run would have if the learned masses were the old ones tilted by exp(share * A / beta),
    i.e. if every iteration had realised `share` of its tilt."""
    old, preference = np.asarray(record["old"]), np.asarray(record["preference"])
    reached = old * np.exp(share * preference / record["beta"])
    return float(np.abs(reached / reached.sum() - np.asarray(record["target"])).sum())


class SweepLogError(ValueError):
    """The sweep's run log cannot be read."""


def read_log(path: Path) -> list[dict]:
    """The sweep's run log, settings renamed since a run was logged read under their present names
    (`LEGACY_SETTINGS`)."""
    records = read_jsonl(path, SweepLogError)
    for r in records:
        r["settings"] = {LEGACY_SETTINGS.get(k, k): v for k, v in r["settings"].items()}
    return records


def _cell(r: dict) -> tuple:
    return r["beta"], tuple(r["preference"]), r["seed"]


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def _run_cell(args: Args, cell: tuple, clock: Clock) -> dict:
    """One sweep run and its log record: the result, its seconds (pretraining apart), when it started and
    finished, and the commit it ran at."""
    beta, preference, seed = cell
    started, start = _now(), time.perf_counter()
    result = run(dataclasses.replace(args, beta=beta, preference=preference, seed=seed, out=None), clock)
    return {
        "settings": settings(args), "beta": beta, "preference": list(preference), "seed": seed,
        "l1": result["l1"], "prior_floor_l1": result["prior_floor_l1"], "old": result["old"].tolist(),
        "target": result["target"].tolist(), "learned": result["learned"].tolist(),
        "iterations": result["iterations"],
        "seconds": round(time.perf_counter() - start - result["pretrain_seconds"], 1),
        "pretrain_seconds": result["pretrain_seconds"], "started": started, "finished": _now(),
        "git": git_commit(),
    }  # fmt: skip


def sweep(args: Args) -> dict:
    """Every (beta, preferred quadrant, seed) of the sweep not yet in the run log under these settings (with
    `rerun`, every one); each finished run is saved before the next starts. Returns the summary (also written
    as .json/.md)."""
    clock = Clock()
    log_path = sweep_log_path(args)
    records = read_log(log_path)
    current = settings(args)
    done = set() if args.rerun else {_cell(r) for r in records if r["settings"] == current}
    # Seed by seed, so that an interrupted sweep has already covered the whole grid with fewer seeds.
    grid = [
        (beta, rotate_preference(args.preference, q), seed)
        for seed in args.sweep_seeds
        for beta in args.sweep_betas
        for q in args.sweep_quadrants
    ]
    todo = [cell for cell in grid if cell not in done]
    print(f"{clock()} sweep of {len(grid)} runs: {len(grid) - len(todo)} already in {log_path}", flush=True)
    for number, cell in enumerate(todo, 1):
        print(
            f"{clock()} run {number}/{len(todo)}: beta {cell[0]}, quadrant {preferred_quadrant(cell[1])} "
            f"preferred, seed {cell[2]}",
            flush=True,
        )
        records.append(_run_cell(args, cell, clock))
        log_path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(log_path, "".join(json.dumps(r) + "\n" for r in records))
    reachable = read_jsonl(reachable_log_path(args.results_dir), SweepLogError)
    summary = summarize(records, current, args.preference, reachable)
    summary_path = args.results_dir / "toy_tilt_sweep.json"
    page = pages_dir(args.results_dir) / "toy_tilt_sweep.md"
    atomic_write_text(summary_path, json.dumps(summary, indent=2) + "\n")
    atomic_write_text(page, sweep_markdown(summary))
    print(f"{clock()} wrote {summary_path} and {page}", flush=True)
    return summary


def _is_paper_setting(beta: float, preference) -> bool:
    return beta == 1.0 and tuple(preference) == PAPER_PREFERENCE


def _sample_std(values) -> float:
    """The sample std (ddof = 1), what "±" means on the page; 0 for one value."""
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0


def _grid(mine: list[dict]) -> list[dict]:
    """Mean and sample std of L1 over seeds per beta and preferred quadrant, of the current settings' runs `mine`."""
    by_cell: dict[tuple, list[dict]] = {}
    for r in mine:
        by_cell.setdefault((r["beta"], preferred_quadrant(r["preference"])), []).append(r)
    return [
        {
            "beta": beta,
            "preferred_quadrant": q,
            "paper_setting": _is_paper_setting(beta, runs[0]["preference"]),
            "seeds": [r["seed"] for r in runs],
            "l1": [r["l1"] for r in runs],
            "l1_mean": float(np.mean([r["l1"] for r in runs])),
            "l1_std": _sample_std([r["l1"] for r in runs]),
        }
        for (beta, q), runs in sorted(
            by_cell.items(), key=lambda item: (item[0][0], QUADRANTS.index(item[0][1]))
        )
    ]


def _other_settings(records: list[dict], current: dict, mine: list[dict], skip=()) -> list[dict]:
    """For every other setting in the log (but `skip`, shown on their own): what it changed, its mean L1, and
    the current settings' mean L1 on the same runs (beta, preference, seed), sorted by mean L1."""
    index = {_cell(r): r["l1"] for r in mine}
    others: dict[str, list[dict]] = {}
    for r in records:
        if r["settings"] != current and r["settings"] not in skip:
            others.setdefault(json.dumps(r["settings"], sort_keys=True), []).append(r)
    others = {key: _latest(runs, runs[0]["settings"]) for key, runs in others.items()}
    rows = []
    for key, runs in others.items():
        paired = [index.get(_cell(r)) for r in runs]
        rows.append(
            {
                "changed": {k: v for k, v in json.loads(key).items() if current.get(k) != v},
                "runs": len(runs),
                "cells": sorted({f"beta {r['beta']} {preferred_quadrant(r['preference'])}" for r in runs}),
                "l1_mean": float(np.mean([r["l1"] for r in runs])),
                "current_l1_mean_same_runs": float(np.mean(paired)) if None not in paired else None,
                "seconds_per_run": float(np.mean([r["seconds"] for r in runs])),
                "coverage": _mean_coverage(runs),
            }
        )
    return sorted(rows, key=lambda row: row["l1_mean"])


def _latest(records: list[dict], wanted: dict) -> list[dict]:
    """The runs logged under settings `wanted`, the latest record of each cell (a rerun supersedes)."""
    return list({_cell(r): r for r in records if r["settings"] == wanted}.values())


def _reruns(records: list[dict], current: dict) -> list[dict]:
    """Cells of the current settings run more than once (`--rerun`): every L1 in log order (the last is the
    one the tables use) and the commit of each run where it was recorded."""
    by_cell: dict[tuple, list[dict]] = {}
    for r in records:
        if r["settings"] == current:
            by_cell.setdefault(_cell(r), []).append(r)
    return [
        {
            "beta": runs[0]["beta"],
            "preferred_quadrant": preferred_quadrant(runs[0]["preference"]),
            "seed": runs[0]["seed"],
            "l1": [r["l1"] for r in runs],
            "commits": [r.get("git", {}).get("commit") for r in runs],
        }
        for runs in by_cell.values()
        if len(runs) > 1
    ]


def _loop_summary(runs: list[dict]) -> dict:
    """Mean L1 over a sweep's runs and, at the paper's setting, each seed's run (L1, when it started, the
    commit it ran at; None for runs logged before those were recorded)."""
    paper = sorted(
        (r for r in runs if _is_paper_setting(r["beta"], r["preference"])), key=lambda r: r["seed"]
    )
    return {
        "runs": len(runs),
        "l1_mean": float(np.mean([r["l1"] for r in runs])) if runs else None,
        "paper_setting": [
            {
                "seed": r["seed"],
                "l1": r["l1"],
                "started": r.get("started"),
                "commit": r.get("git", {}).get("commit"),
            }
            for r in paper
        ],
    }


def _command(current: dict, base_preference) -> str:
    defaults = settings(Args())
    overrides = []
    for k, v in current.items():
        flag = f"--{k.replace('_', '-')}"
        if defaults[k] != v:
            overrides.append((flag if v else f"--no-{flag[2:]}") if isinstance(v, bool) else f"{flag} {v}")
    if tuple(base_preference) != PAPER_PREFERENCE:
        overrides.append("--preference " + " ".join(f"{v:g}" for v in base_preference))
    return " ".join([f"{COMMAND} --sweep", *overrides])


def summarize(records: list[dict], current: dict, base_preference, reachable: list[dict] = ()) -> dict:
    """The current settings' grid (mean and std of L1 over seeds per beta and preferred quadrant); the
    reproduction (the paper's algorithm at the default settings) and the target-mass feedback extension at the
    same settings, side by side; for every other setting in the log its mean L1 next to the current settings'
    on the same runs; and the drift-reachable shares measured by `toy_reachable` (`reachable`: its log) with
    what they imply."""
    mine = _latest(records, current)
    paper_algorithm = settings(Args())
    extension = {**paper_algorithm, "target_mass_feedback": True}
    pretrained = [r["pretrain_seconds"] for r in mine if r["pretrain_seconds"]]
    floors = [r["prior_floor_l1"] for r in mine if "prior_floor_l1" in r]
    paper = [r["l1"] for r in mine if _is_paper_setting(r["beta"], r["preference"])]
    return {
        "command": _command(current, base_preference),
        "settings": current,
        "base_preference": list(base_preference),
        "grid": _grid(mine),
        "runs": len(mine),
        "l1_mean": float(np.mean([r["l1"] for r in mine])) if mine else None,
        "paper_setting_l1_mean": float(np.mean(paper)) if paper else None,
        "reproduction": _loop_summary(_latest(records, paper_algorithm))["paper_setting"],
        "loops": {
            "paper": _loop_summary(_latest(records, paper_algorithm)),
            "target_mass_feedback": _loop_summary(_latest(records, extension)),
        },
        "seconds_per_run": float(np.mean([r["seconds"] for r in mine])) if mine else None,
        "pretrain_seconds_per_seed": float(np.mean(pretrained)) if pretrained else None,
        "prior_floor_l1_mean": float(np.mean(floors)) if floors else None,
        "prior_floor_l1_max": float(np.max(floors)) if floors else None,
        "other_settings": _other_settings(records, current, mine, skip=(extension,)),
        "reruns": _reruns(records, current),
        "coverage_mean": _mean_coverage(mine),
        "reachable": _reachable_summary(reachable, current, mine),
    }


def _mean_coverage(runs: list[dict]) -> float | None:
    shares = [c for r in runs if (c := coverage(r)) is not None]
    return float(np.mean(shares)) if shares else None


def _reachable_summary(measured: list[dict], current: dict, mine: list[dict]) -> dict | None:
    """The drift-reachable share of each measured old policy, and for the current pretraining settings
    the L1 errors the sweep would have if every iteration realised exactly that share."""
    if not measured:
        return None
    rows = [
        {
            "changed": {k: v for k, v in r["pretraining"].items() if current.get(k) != v},
            "seed": r["seed"],
            "prior": r["prior_share"],
            "reachable": r["reachable"],
            "nonlinear": r["nonlinear"],
        }
        for r in measured
    ]
    shares = [row["reachable"] for row in rows if not row["changed"]]
    share = float(np.mean(shares)) if shares else None
    paper = [r for r in mine if _is_paper_setting(r["beta"], r["preference"])]
    return {
        "rows": sorted(rows, key=lambda row: (json.dumps(row["changed"], sort_keys=True), row["seed"])),
        "share_mean": share,
        "l1_at_share": float(np.mean([tilted_l1(r, share) for r in mine])) if share and mine else None,
        "paper_l1_at_share": float(np.mean([tilted_l1(r, share) for r in paper]))
        if share and paper
        else None,
    }


def sweep_markdown(summary: dict) -> str:
    """The summary as Markdown: the reproduction beside the paper and the extension, the grid, then the other
    settings measured."""
    lines = [
        "# Toy tilt sweep",
        "",
        f"Generated by `{summary['command']}` from `raw/toy_tilt_sweep.jsonl`; do not edit.",
        "",
        "Quadrant-mass L1 error between the learned policy and the exponential tilt p* ∝ p_old exp(A/β) "
        "(the paper's App. C.1 toy). The reproduction is GSB-MDPO as the paper states it: each mirror-descent "
        f"iteration is fed the advantage A (`{COMMAND}`, the default). The "
        "extension below it is not the paper's algorithm: it uses target information the paper's update "
        "does not have.",
        "",
        *_loops_table(summary["loops"]),
        "",
        "Over the sweep's settings: mean ± sample std over seeds for each temperature β and preferred quadrant "
        f"(the preference {summary['base_preference']} on quadrants I..IV rotated so that its largest entry "
        "lands on that quadrant), for the settings below. **Bold**: the paper's setting (β = 1, quadrant III "
        "preferred).",
        "",
        *_grid_table(summary["grid"]),
        *_runs_lines(summary),
        *_reruns_lines(summary["reruns"]),
        "",
        "Settings: " + ", ".join(f"`{k}={v}`" for k, v in summary["settings"].items()) + ".",
        *_reachable_markdown(summary),
        *_other_settings_lines(summary["other_settings"]),
    ]
    return "\n".join(lines) + "\n"


def _paper_setting_text(loop: dict) -> str:
    runs = loop["paper_setting"]
    if not runs:
        return "-"
    l1 = [r["l1"] for r in runs]
    return f"{np.mean(l1):.3f} ± {_sample_std(l1):.3f} (seeds {', '.join(str(r['seed']) for r in runs)})"


def _loops_table(loops: dict) -> list[str]:
    """The reproduction beside the paper's number, and the extension in its own labelled row."""
    rows = [
        ("**reproduction**: GSB-MDPO as the paper states it", "the advantage A", loops["paper"]),
        ("extension, **not the paper's algorithm** (`--target-mass-feedback`)",
         "λ log(aim / masses): the current policy's quadrant masses, measured on a fresh sample, and the "
         "target's tilt path, which the paper's update does not have", loops["target_mass_feedback"]),
    ]  # fmt: skip
    lines = [
        "| algorithm | each iteration is fed | L1 at the paper's setting, mean ± sample std | sweep mean L1 (runs) |",
        "|---|---|---|---|",
    ]
    for name, fed, loop in rows[:1]:
        lines.append(f"| {name} | {fed} | **{_paper_setting_text(loop)}** | {_mean_text(loop)} |")
    lines.append("| the paper (App. C.1) | the advantage A | 0.100 (one run reported) | - |")
    for name, fed, loop in rows[1:]:
        lines.append(f"| {name} | {fed} | {_paper_setting_text(loop)} | {_mean_text(loop)} |")
    return lines


def _reruns_lines(reruns: list[dict]) -> list[str]:
    """Cells run again (`--rerun`): the earlier L1 beside the one the tables use. A run need not repeat bit for
    bit: the first reruns started from the same old policies (the same old masses and first samples) and still
    ended apart, so the difference is part of the result."""
    if not reruns:
        return []
    cells = "; ".join(
        f"β = {r['beta']:g}, {r['preferred_quadrant']} preferred, seed {r['seed']}: "
        + " then ".join(f"{v:.3f}" for v in r["l1"])
        + f" (the last at {(r['commits'][-1] or 'an unrecorded commit')[:7]})"
        for r in reruns
    )
    return [
        "",
        f"Cells run again, each L1 in the order run (the tables use the last): {cells}. The runs do not repeat "
        "bit for bit: where the old policy and the first iteration's samples match, the updates' floating-point "
        "rounding may still differ (an old policy freshly pretrained or loaded from the cache can compile to "
        "different programs), and a small difference can grow over the iterations.",
    ]


def _mean_text(loop: dict) -> str:
    return "-" if loop["l1_mean"] is None else f"{loop['l1_mean']:.3f} ({loop['runs']})"


def _grid_table(grid: list[dict]) -> list[str]:
    cells = {(c["beta"], c["preferred_quadrant"]): c for c in grid}
    lines = [
        "| β | " + " | ".join(f"{q} preferred" for q in QUADRANTS) + " | mean |",
        "|---|" + "---|" * (len(QUADRANTS) + 1),
    ]
    for beta in sorted({cell["beta"] for cell in grid}):
        row = []
        for q in QUADRANTS:
            cell = cells.get((beta, q))
            text = (
                "" if cell is None else f"{cell['l1_mean']:.3f} ± {cell['l1_std']:.3f} (n={len(cell['l1'])})"
            )
            row.append(f"**{text}**" if cell is not None and cell["paper_setting"] else text)
        values = [v for c in grid if c["beta"] == beta for v in c["l1"]]
        lines.append(f"| {beta:g} | " + " | ".join(row) + f" | {np.mean(values):.3f} |")
    return lines


def _runs_lines(summary: dict) -> list[str]:
    if not summary["runs"]:
        return []
    paper, pretrain = summary["paper_setting_l1_mean"], summary["pretrain_seconds_per_seed"]
    return [
        "",
        f"Over all {summary['runs']} runs of these settings: mean L1 {summary['l1_mean']:.3f}"
        + ("" if paper is None else f"; at the paper's setting: {paper:.3f}")
        + f". One run takes {summary['seconds_per_run']:.0f} s on average here (2 shared CPU cores)"
        + (
            ""
            if pretrain is None
            else f", once its seed's old policy is pretrained ({pretrain:.0f} s, cached)"
        )
        + ".",
        "",
        "An update that tilted every path as p* does would still leave an L1 error of "
        f"{summary['prior_floor_l1_mean']:.3f} on average (at most {summary['prior_floor_l1_max']:.3f}), "
        "because no update can reweight the prior a^(0): the L1 between the target and the old policy "
        "tilted given each draw of a^(0). The target-mass feedback extension aims at the quadrant masses "
        "instead, so it can tilt more given some draws of a^(0) to make up for others.",
    ]


def _other_settings_lines(other_settings: list[dict]) -> list[str]:
    if not other_settings:
        return []
    lines = [
        "",
        "## Other settings measured",
        "",
        "Each row changes the settings above as shown; its mean L1 is next to the current settings' "
        "mean on the same (β, quadrant, seed) runs where those exist.",
        "",
        "| changed | runs | cells | mean L1 | current settings, same runs | coverage | s / run |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in other_settings:
        changed = ", ".join(f"`{k}={v}`" for k, v in row["changed"].items())
        same = row["current_l1_mean_same_runs"]
        cells_text = ", ".join(row["cells"]) if len(row["cells"]) <= 3 else f"{len(row['cells'])} cells"
        lines.append(
            f"| {changed} | {row['runs']} | {cells_text} | {row['l1_mean']:.3f} | "
            f"{'' if same is None else f'{same:.3f}'} | {_fmt_share(row['coverage'])} | "
            f"{row['seconds_per_run']:.0f} |"
        )
    return lines


def _fmt_share(share: float | None) -> str:
    return "" if share is None else f"{share:.2f}"


def _reachable_markdown(summary: dict) -> list[str]:
    """What one iteration realises of its tilt, and what any drift change could (`toy_reachable`)."""
    if summary["coverage_mean"] is None:
        return []
    lines = [
        "",
        "## What limits the tilt",
        "",
        f"Coverage: each mirror-descent iteration realised on average {summary['coverage_mean']:.2f} of its "
        "own aim, the tilt exp(advantage/λ) of the masses it started from (the change of the centred log "
        "quadrant masses, projected on the change the aim asks for; the column `coverage` below gives it for "
        "the other settings).",
    ]
    reach = summary["reachable"]
    if reach is None:
        return lines
    lines += [
        "",
        "Reachable share (`python -m trainers.experiments.toy_reachable`, from `raw/toy_tilt_reachable.jsonl`): "
        "the share of Var(A) that a drift change can tilt by, to first order, under each old policy (paper "
        "preference). The prior a^(0) is fixed and each generation step is Gaussian with a fixed variance, so "
        "a drift change tilts a step only by functions linear in its noise; the rest of each step's share of "
        "Var(A) (the nonlinear remainder, which coarser steps enlarge) is out of reach of any "
        "optimizer. The three shares add up to 1 up to the Monte Carlo error.",
        "",
        "| old policy | seed | prior | reachable | nonlinear | sum |",
        "|---|---|---|---|---|---|",
    ]
    for row in reach["rows"]:
        changed = ", ".join(f"`{k}={v}`" for k, v in row["changed"].items()) or "these settings"
        lines.append(
            f"| {changed} | {row['seed']} | {row['prior']:.3f} | {row['reachable']:.3f} | "
            f"{row['nonlinear']:.3f} | {row['prior'] + row['reachable'] + row['nonlinear']:.2f} |"
        )
    if reach["l1_at_share"] is not None:
        paper = reach["paper_l1_at_share"]
        lines += [
            "",
            f"If every iteration of the paper's update (each fed A) realised exactly the reachable share "
            f"({reach['share_mean']:.2f}, the mean over seeds for these settings), the learned masses would be "
            f"p_old exp(share · A/β): a sweep mean L1 of {reach['l1_at_share']:.3f}"
            + ("" if paper is None else f" and {paper:.3f} at the paper's setting")
            + ". The target-mass feedback extension aims each iteration at the next point of the tilt path "
            "from the masses the policy has, so what one iteration cannot reach is carried into the next aim: "
            "this bound is the paper's update's, not the extension's.",
        ]
    return lines


def validate(args: Args) -> None:
    """Raise ValueError naming the first setting that cannot work."""
    positive = ("beta", "mode_std", "sigma_max", "sigma_min", "lr", "step_clip", "path_clip")
    for name in positive:
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    counts = ("num_steps", "width", "depth", "pretrain_steps", "iterations", "updates_per_iteration",
              "paths_per_iteration", "minibatch", "eval_samples")  # fmt: skip
    for name in counts:
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.minibatch > args.paths_per_iteration:
        raise ValueError(
            f"--minibatch ({args.minibatch}) exceeds --paths-per-iteration ({args.paths_per_iteration})"
        )
    if not all(np.isfinite(args.preference)):
        raise ValueError(f"--preference must be finite, got {args.preference}")
    if args.sweep:
        bad = [q for q in args.sweep_quadrants if q not in (1, 2, 3, 4)]
        if bad:
            raise ValueError(f"--sweep-quadrants takes 1..4 (I..IV), got {bad}")
        if not args.sweep_betas or not args.sweep_seeds or not args.sweep_quadrants:
            raise ValueError("--sweep needs at least one beta, quadrant and seed")
        if any(beta <= 0 for beta in args.sweep_betas):
            raise ValueError(f"--sweep-betas must be positive, got {args.sweep_betas}")


def main(argv=None) -> None:
    args = tyro_cli(Args, args=argv, description=__doc__, prog=COMMAND)
    try:
        validate(args)
    except ValueError as err:
        fail(str(err), USAGE)
    try:
        if args.sweep:
            sweep(args)
            return
        result = run(args, Clock())
    except (SweepLogError, PolicyFormatError) as err:
        fail(str(err), FAILURE)
    print(f"{'':8s}" + "".join(f"{n:>8s}" for n in ("QI", "QII", "QIII", "QIV")))
    for row in ("old", "target", "learned"):
        print(f"{row:8s}" + "".join(f"{v:8.3f}" for v in result[row]))
    if args.target_mass_feedback:
        print(
            f"quadrant-mass L1 error: {result['l1']:.3f} (extension with target-mass feedback, not the "
            "paper's algorithm; the paper reports 0.100 for its own update)"
        )
    else:
        print(f"quadrant-mass L1 error: {result['l1']:.3f} (the paper's algorithm; the paper reports 0.100)")
    if args.out is not None:
        print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
