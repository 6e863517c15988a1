"""Behaviour cloning: fit a flow policy to demonstrations (a Minari dataset) by bridge matching.

    python -m trainers.bc --dataset DIR_OR_MINARI_ID [--env ENV] [--policy.num-steps 8 ...] [--steps 5000]

The policy is GSB-MDPO's: the same `PolicySpec` fields (`--policy.*`, the cpu preset's by default), SDE
sampler and observation normaliser, whose statistics are the dataset's observations. Its drift is fitted
by discrete Brownian-bridge matching on the sampler's own step variances (`trainers._core.bridge_matching`)
from a^(0) ~ N(0, I) to each demonstrated action, mapped back through the squash (the pre-squash a^(N)).

The run folder is a trainer's (run.json, metrics.jsonl, policy/ with config.json, model.safetensors and
results.json from a short deterministic evaluation), so `GSBPolicy.from_pretrained`, `python -m export.onnx`,
`python -m hub_cards.publish` and `--init-from` of trainers.gsb_mdpo, fpo and dppo all take it. env_steps is
0 throughout: the policy never acted in the env while it was fitted.

DIR_OR_MINARI_ID is a dataset folder (`trainers.collect`'s --out, or its data/ folder) or the id of a
dataset already in the local Minari cache; nothing is downloaded. Needs the `bc` extra (minari, h5py).
"""

import dataclasses
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from gsbpolicy import FlowPolicy, GSBPolicy, PolicySpec, evaluate, make_policy, save_policy
from gsbpolicy._cli import FAILURE, INTERRUPTED, USAGE, MissingExtraError, require_extra, write_failure
from gsbpolicy._files import atomic_write_text, read_json, sha256_bytes

from ._core.bridge_matching import bridge_matching_loss, fit
from ._core.cli import closing_lines, fail, parse, quote
from ._core.config import PolicyArgs, check_env_id, check_finite, output_path, require
from ._core.evaluation import eval_seed, write_results
from ._core.rundir import RunFolderError, open_run_folder
from ._core.runlog import write_run_json
from .collect import CHECKSUMS
from .gsb_mdpo import CPU_POLICY

ALGO = "bc"
KEPT = "no policy was written: the same command with --resume fits it again"
ACTION_EDGE = 1e-3
"""Demonstrated actions on a tanh squash's bounds are pulled this far inside [-1, 1] before the inverse
tanh (arctanh(1 - 1e-3) = 3.8), so that saturated actions give finite targets."""


@dataclasses.dataclass(frozen=True)
class Args:
    """Behaviour cloning settings (the run folder's fields are the trainers')."""

    dataset: str = ""
    """The demonstrations: a Minari dataset folder or the id of a dataset in the local Minari cache."""
    env: str | None = None
    """Gymnasium env id to evaluate in (it must be the dataset's env); default: the dataset's env."""
    seed: int = 0
    """Random seed (network init, the fit's minibatches and noise, the evaluation's resets)."""
    steps: int = 5000
    """Gradient steps of the fit."""
    batch_size: int = 256
    """Demonstrated transitions per gradient step."""
    lr: float = 1e-3
    """Adam learning rate of the fit."""
    eval_episodes: int = 10
    """Episodes of the final deterministic evaluation written to results.json."""
    output_dir: Path | None = None
    """Run folder; default runs/<env>/bc/seed_<seed>."""
    resume: bool = False
    """Redo an interrupted fit in its run folder (the same settings; the fit restarts from step 0 and gives
    the same policy)."""
    preset: str = "cpu"
    """Name of the preset these values started from (recorded in run.json)."""
    policy: PolicyArgs = CPU_POLICY
    """The policy fitted: by default `trainers.gsb_mdpo`'s `cpu` preset's, so that its `--init-from` takes it as it is."""

    def validate(self) -> None:
        check_finite(self)
        require(bool(self.dataset), "dataset", "given (a Minari dataset folder or id)", self.dataset)
        require(0 <= self.seed < 2**32, "seed", "in [0, 2**32)", self.seed)
        for name in ("steps", "batch_size", "eval_episodes"):
            require(getattr(self, name) >= 1, name, ">= 1", getattr(self, name))
        require(self.lr > 0, "lr", "> 0", self.lr)
        self.policy.validate()
        if self.env is not None:
            check_env_id(self.env)


PRESETS = {"cpu": lambda env: Args(env=env)}
"""One preset, so that the command line (and a model card's reproduce line) reads like the trainers'."""


def load_dataset(source: str):
    """The Minari dataset `source` names: a folder (with or without its data/ part) or a local Minari id."""
    import minari

    path = Path(source).expanduser()
    if path.is_dir():
        data = path / "data" if (path / "data" / "metadata.json").is_file() else path
        if not (data / "metadata.json").is_file():
            raise ValueError(f"--dataset {source}: not a Minari dataset folder (no data/metadata.json)")
        check_recorded_checksums(data.parent, source)
        try:
            return minari.MinariDataset(data)
        except (OSError, KeyError, ValueError, TypeError, RecursionError) as err:  # damaged metadata or data
            raise ValueError(
                f"--dataset {source}: cannot be read ({type(err).__name__}: {' '.join(str(err).split())}); its "
                "files are truncated or corrupted"
            ) from None
    if path.exists() or source.startswith((".", "/", "~")):
        raise ValueError(f"--dataset {source}: no such dataset folder")
    try:
        return minari.load_dataset(source, download=False)
    except (FileNotFoundError, ValueError):  # Minari's own message suggests download=True
        raise ValueError(
            f"--dataset {source}: not a folder, and not a dataset in the local Minari cache "
            "($MINARI_DATASETS_PATH, else ~/.minari/datasets); this command never downloads: "
            "`minari download ID` first"
        ) from None


def check_recorded_checksums(root: Path, source: str) -> None:
    """ValueError if a file of a dataset `trainers.collect` recorded (it left `CHECKSUMS` in `root`) no longer
    has the sha256 recorded with it. A dataset from elsewhere has no such file, and is read as it is."""
    checksums = root / CHECKSUMS
    if not checksums.is_file():
        return
    recorded = read_json(checksums)
    for name, digest in sorted(recorded.items()) if isinstance(recorded, dict) else []:
        path = root / name
        if not path.is_file() or sha256_bytes(path.read_bytes()) != digest:
            raise ValueError(
                f"--dataset {source}: {name} does not match the sha256 trainers.collect recorded in {checksums}: "
                "the dataset was damaged or changed after recording; record it again"
            )


def demonstrations(dataset) -> tuple[np.ndarray, np.ndarray]:
    """(observations, actions) of every transition, float32: each episode's observations without its last."""
    import gymnasium

    for name, space in (("observation", dataset.observation_space), ("action", dataset.action_space)):
        if not isinstance(space, gymnasium.spaces.Box) or len(space.shape) != 1:
            raise ValueError(
                f"the dataset's {name} space is {space}; behaviour cloning needs flat Box spaces"
            )
    try:
        episodes = list(dataset.iterate_episodes())
    except (OSError, KeyError, ValueError) as err:  # h5py's answers to a truncated or damaged file
        raise ValueError(
            f"the dataset's episodes cannot be read ({' '.join(str(err).split())}): its data file is truncated or "
            "corrupted; record the dataset again"
        ) from None
    if not episodes:
        raise ValueError("the dataset holds no episodes")
    for ep in episodes:
        o, a = np.shape(ep.observations), np.shape(ep.actions)
        if (
            len(o) != 2
            or len(a) != 2
            or o[0] != a[0] + 1
            or (o[1], a[1]) != (obs_dim(dataset), act_dim(dataset))
        ):
            raise ValueError(
                f"the dataset's episode {ep.id} has observations of shape {o} and actions of shape {a}, not "
                f"(T + 1, {obs_dim(dataset)}) and (T, {act_dim(dataset)}): the dataset is corrupted"
            )
    obs = np.concatenate([ep.observations[:-1] for ep in episodes]).astype(np.float32)
    actions = np.concatenate([ep.actions for ep in episodes]).astype(np.float32)
    # The same checks as a policy's observation statistics get on load: the normaliser is fitted to these.
    if not (np.isfinite(obs).all() and np.isfinite(actions).all()):
        raise ValueError("the dataset holds NaN or inf observations or actions")
    check_actions_in_bounds(actions, dataset.action_space)
    return obs, actions


def obs_dim(dataset) -> int:
    return dataset.observation_space.shape[0]


def act_dim(dataset) -> int:
    return dataset.action_space.shape[0]


def check_actions_in_bounds(actions: np.ndarray, space) -> None:
    """Demonstrated actions must lie in the dataset's action space, up to 1% of its range: further out, they are
    in other units than the space says, and fitting their clipped values would imitate something else."""
    low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    slack = 0.01 * np.where(np.isfinite(high - low), high - low, np.inf)
    outside = (actions < low - slack) | (actions > high + slack)
    if outside.any():
        worst = np.argwhere(outside)[0].tolist()
        raise ValueError(
            f"the dataset holds {int(outside.sum())} action values outside its action space [{low.tolist()}, "
            f"{high.tolist()}] (e.g. {float(actions[tuple(worst)]):.4g} at transition {worst[0]}, dimension "
            f"{worst[1]}): the actions are not in the space's units"
        )


def dataset_env_id(dataset) -> str | None:
    spec = dataset.spec.env_spec
    return None if spec is None else spec.id


def pre_squash(actions: np.ndarray, spec) -> np.ndarray:
    """The a^(N) that `FlowPolicy.to_env` maps to each env action (the inverse of squash and rescale)."""
    if spec.action_low is None or spec.squash == "none":
        return actions
    low, high = np.asarray(spec.action_low, np.float32), np.asarray(spec.action_high, np.float32)
    unit = np.clip(2 * (actions - low) / (high - low) - 1, -1, 1)
    if spec.squash == "clip":
        return unit
    return np.arctanh(np.clip(unit, -1 + ACTION_EDGE, 1 - ACTION_EDGE))


def resolve(args: Args, dataset) -> Args:
    """`args` with the env taken from the dataset (checked against --env)."""
    recorded = dataset_env_id(dataset)
    if args.env is None:
        if recorded is None:
            raise ValueError("the dataset records no env; pass --env")
        check_env_id(recorded)
        return dataclasses.replace(args, env=recorded)
    if recorded is not None and recorded != args.env:
        raise ValueError(f"--env {args.env} is not the dataset's env {recorded}")
    return args


def check_spaces(dataset, env, env_id: str) -> None:
    obs_shape, act_space = env.observation_space.shape, env.action_space
    if dataset.observation_space.shape != obs_shape or dataset.action_space.shape != act_space.shape:
        raise ValueError(
            f"the dataset's observations {dataset.observation_space.shape} and actions "
            f"{dataset.action_space.shape} do not fit {env_id} ({obs_shape}, {act_space.shape})"
        )


def bc_loss(batch_size: int):
    def loss(policy, data, key):
        obs, x1 = data
        k_idx, k0, kn, kz = jax.random.split(key, 4)
        idx = jax.random.randint(k_idx, (batch_size,), 0, obs.shape[0])
        x0 = jax.random.normal(k0, (batch_size, x1.shape[1]))
        n = jax.random.randint(kn, (batch_size,), 0, policy.spec.num_steps)
        z = jax.random.normal(kz, (batch_size, x1.shape[1]))
        return bridge_matching_loss(policy, obs[idx], x0, x1[idx], n, z)

    return loss


def _demonstrations_and_spec(args: Args) -> tuple[Args, np.ndarray, np.ndarray, PolicySpec]:
    """The resolved args, the dataset's observations and actions, and the policy's spec, all checked against
    the env the dataset names. ValueError: a dataset that does not fit it."""
    import gymnasium

    dataset = load_dataset(args.dataset)
    args = resolve(args, dataset)
    try:
        obs, actions = demonstrations(dataset)
    except ValueError as err:
        raise ValueError(f"--dataset {args.dataset}: {err}") from None
    env = gymnasium.make(args.env)
    try:
        check_spaces(dataset, env, args.env)
        spec = args.policy.spec(
            obs.shape[1], actions.shape[1], env.action_space.low, env.action_space.high, args.env
        )
    finally:
        env.close()
    return args, obs, actions, spec


def _fit(args: Args, spec: PolicySpec, obs: np.ndarray, actions: np.ndarray) -> tuple[FlowPolicy, list[dict]]:
    """A policy fitted to the demonstrations by bridge matching, with one metrics record per chunk of steps."""
    init_key, fit_key = jax.random.split(jax.random.key(args.seed))
    policy = make_policy(spec, key=init_key)
    policy = policy.with_normalizer(policy.normalizer.update(jnp.asarray(obs)))
    records, start = [], time.perf_counter()

    def log(done: int, loss: float) -> None:
        records.append(
            {
                "type": "train",
                "iteration": len(records) + 1,
                "env_steps": 0,
                "time/wall_s": time.perf_counter() - start,
                "train/bc_steps": done,
                "train/bc_loss": loss,
            }
        )
        print(f"step {done}/{args.steps}: bridge-matching loss {loss:.4f}", flush=True)

    data = (jnp.asarray(obs), jnp.asarray(pre_squash(actions, spec)))
    chunk = max(1, args.steps // 10)
    policy = fit(
        policy, bc_loss(args.batch_size), data, args.steps, fit_key, args.lr, chunk=chunk, on_chunk=log
    )
    if not all(np.isfinite(r["train/bc_loss"]) for r in records):
        raise FloatingPointError("the fit went non-finite (NaN or inf loss); try a smaller --lr")
    return policy, records


def train(args: Args) -> Path:
    """Fit, evaluate and write the run folder; returns the policy folder. ValueError: bad input."""
    require_extra("bc", ["minari", "h5py"], "python -m trainers.bc")
    args, obs, actions, spec = _demonstrations_and_spec(args)
    run_dir = output_path(args.output_dir, args.env, ALGO, args.seed)
    lock = open_run_folder(run_dir, ALGO, args)
    try:
        write_run_json(run_dir, ALGO, args)
        policy, records = _fit(args, spec, obs, actions)
        seed = eval_seed(args.seed, len(records))
        result = evaluate(GSBPolicy(policy), args.env, n_episodes=args.eval_episodes, seed=seed)
        returns, lengths = np.asarray(result.returns), np.asarray(result.lengths)
        records.append(
            {
                "type": "eval",
                "iteration": len(records),
                "env_steps": 0,
                "eval/return_deterministic": float(returns.mean()),
                "eval/return_deterministic_std": float(returns.std()),
                "eval/length_deterministic": float(lengths.mean()),
            }
        )
        atomic_write_text(run_dir / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in records))
        policy_dir = run_dir / "policy"
        save_policy(policy, policy_dir)
        write_results(
            policy_dir,
            env_id=args.env,
            algo=ALGO,
            returns=returns,
            lengths=lengths,
            seed=args.seed,
            env_steps=0,
            eval_seed=seed,
        )
    finally:
        lock.release()
    return policy_dir


def main(argv=None) -> Path:
    args = parse(Args, PRESETS, "cpu", __doc__, argv)
    try:
        policy_dir = train(args)
    except (ValueError, RunFolderError) as err:
        fail(str(err), USAGE)
    except (MissingExtraError, FloatingPointError) as err:
        fail(str(err), FAILURE)
    except KeyboardInterrupt:
        fail(f"interrupted (Ctrl-C); {KEPT}", INTERRUPTED)
    except OSError as err:
        fail(f"{write_failure(err)}; {KEPT}", FAILURE)
    print(closing_lines(policy_dir))
    print(
        f"  fine-tune it: python -m trainers.gsb_mdpo --env {quote(args.env) if args.env else '<the dataset env>'} "
        f"--init-from {quote(policy_dir)}"
    )
    return policy_dir


if __name__ == "__main__":
    main()
