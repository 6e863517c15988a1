"""The toy's settings: one flat command line (`Args`), which of its fields define a run's result, and the checks
that turn a setting that cannot work into a one-line usage error."""

import dataclasses
from pathlib import Path

import numpy as np

COMMAND = "python -m trainers.lab.toy"
"""How the toy is run (the sweep's page and summary name it)."""
QUADRANTS = ("I", "II", "III", "IV")
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
OUTPUT_FIELDS = (
    "out",
    "cache_dir",
    "sweep",
    "sweep_betas",
    "sweep_quadrants",
    "sweep_seeds",
    "rerun",
    "results_dir",
)
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
    """The name (I..IV) of the quadrant `preference` favours most."""
    return QUADRANTS[int(np.argmax(preference))]


def validate(args: Args) -> None:
    """Raise ValueError naming the first setting that cannot work."""
    positive = ("beta", "mode_std", "sigma_max", "sigma_min", "lr", "step_clip", "path_clip")
    for name in positive:
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    counts = (
        "num_steps",
        "width",
        "depth",
        "pretrain_steps",
        "iterations",
        "updates_per_iteration",
        "paths_per_iteration",
        "minibatch",
        "eval_samples",
    )
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
