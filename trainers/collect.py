"""Record demonstrations: episodes of any loadable policy in a Gymnasium env, saved as a Minari dataset.

    python -m trainers.collect POLICY --out DIR [--env ENV] [--episodes 10] [--action-noise 0.1] [--seed 0]

POLICY is a policy folder or a Hub repo id (`GSBPolicy.from_pretrained`: flow, Gaussian or GenPO). The
episodes go through Minari's own `DataCollector`, so DIR is an ordinary Minari dataset (DIR/data holds
its files): `python -m trainers.bc --dataset DIR` fits a flow policy to it, and `minari.MinariDataset(DIR /
"data")` reads it anywhere. Nothing is downloaded. The dataset is written beside DIR first and moved into
place whole, so an interrupted collection leaves no half dataset. Needs the `bc` extra (minari, h5py).
"""

import dataclasses
import json
import os
import re
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Annotated

import numpy as np
import tyro

from gsbpolicy import HubRequestError
from gsbpolicy._cli import (
    FAILURE,
    INTERRUPTED,
    USAGE,
    MissingExtraError,
    refuse_owned,
    require_extra,
    write_failure,
)
from gsbpolicy._files import atomic_write_text, sha256_bytes
from gsbpolicy.gym import check_spaces, checked

from ._core.cli import fail, quote, tyro_cli


@dataclasses.dataclass(frozen=True)
class Args:
    """What to record and where."""

    policy: Annotated[str, tyro.conf.Positional]
    """The policy: a policy folder or a Hub repo id."""
    out: Path
    """The dataset folder to write (must not exist or be empty; see --overwrite)."""
    env: str | None = None
    """Gymnasium env id; default: the env the policy was trained on."""
    episodes: int = 10
    """Episodes to record."""
    action_noise: float = 0.0
    """Std of Gaussian noise added to every action, in units of half the action range (then clipped to
    the bounds): demonstrations that cover more than the policy's own states."""
    stochastic: bool = False
    """Sample the policy's stochastic actions (a flow's SDE) instead of its deterministic ones."""
    seed: int = 0
    """Episode i is reset with seed + i; the noise generators are seeded with it too."""
    dataset_id: str | None = None
    """The Minari dataset id recorded in its metadata; default gsbpolicy/<env name>/demos-v0."""
    overwrite: bool = False
    """Replace a non-empty --out folder that holds a Minari dataset."""


CHECKSUMS = "sha256.json"
"""Written beside a recorded dataset's data/ folder: the sha256 of each of its files, which `trainers.bc` checks
(Minari's HDF5 files carry no checksum of their own, so a flipped bit would otherwise train unnoticed)."""
KEPT = "no dataset was written, and an earlier --out is as it was"
"""What an interrupted or failed collection leaves: the dataset is built aside and moved into place whole."""


def dataset_id(args: Args, env_id: str) -> str:
    env_name = re.sub(r"-v\d+$", "", env_id.rpartition(":")[2])
    return args.dataset_id or f"gsbpolicy/{env_name}/demos-v0"


def check_args(args: Args) -> None:
    """Raise ValueError naming the first bad option."""
    if args.episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {args.episodes}")
    if not (np.isfinite(args.action_noise) and args.action_noise >= 0):
        raise ValueError(f"--action-noise must be a finite number >= 0, got {args.action_noise}")
    if not 0 <= args.seed < 2**31:
        raise ValueError(f"--seed must be in [0, 2**31), got {args.seed}")
    out = args.out
    if str(out).strip() in ("", "."):
        raise ValueError(f"--out must name a dataset folder, got {str(out)!r}")
    if out.is_symlink():
        raise ValueError(f"--out {out} is a symbolic link (to {os.readlink(out)}); give the folder itself")
    refuse_owned(out, "--out", ValueError)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not args.overwrite:
            raise ValueError(f"--out {out} is not empty; pass --overwrite to replace it, or choose another")
        if not (out / "data" / "metadata.json").is_file():
            raise ValueError(f"--overwrite replaces only a Minari dataset, and {out} holds none")


def load_policy_arg(name: str):
    """The policy POLICY names; a ValueError with the reason if it cannot be loaded."""
    from gsbpolicy import GSBPolicy, HubRequestError, PolicyFormatError

    try:
        return GSBPolicy.from_pretrained(name)
    except HubRequestError:  # the Hub failed, not the argument: main() says so with exit 1
        raise
    except (OSError, PolicyFormatError, ValueError) as err:  # missing folder, bad files, Hub errors
        raise ValueError(f"cannot load the policy {name}: {err}") from None


def make_env(env_id: str):
    import gymnasium

    try:
        return gymnasium.make(env_id)
    except gymnasium.error.Error as err:
        raise ValueError(f"cannot make the env {env_id!r}: {err}") from None


def record(policy, env, args: Args, env_id: str, staging: Path):
    """Run the episodes through a `DataCollector` and write the dataset into `staging`; per-episode
    returns."""
    from minari import DataCollector

    # Minari writes under $MINARI_DATASETS_PATH; pointing it at the staging folder keeps the user's
    # Minari cache untouched and lets the finished dataset move into place in one rename.
    previous = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(staging)
    try:
        collector = DataCollector(env)
        rng = np.random.default_rng(args.seed)
        policy.set_seed(args.seed)
        low, high = env.action_space.low, env.action_space.high
        returns = []
        for episode in range(args.episodes):
            obs, _ = collector.reset(seed=args.seed + episode)
            total, done = 0.0, False
            while not done:
                action, _ = policy.predict(obs, deterministic=not args.stochastic)
                if args.action_noise > 0:
                    noise = rng.normal(0.0, args.action_noise, action.shape) * (high - low) / 2
                    action = np.clip(action + noise, low, high).astype(action.dtype)
                obs, reward, terminated, truncated, _ = collector.step(action)
                total, done = total + float(reward), terminated or truncated
            returns.append(total)
        how = "stochastic" if args.stochastic else "deterministic"
        with warnings.catch_warnings():  # Minari asks for an author, e-mail and code link we do not have
            warnings.filterwarnings("ignore", r"`\w+` is set to None", UserWarning)
            collector.create_dataset(
                dataset_id=dataset_id(args, env_id),
                algorithm_name=f"gsbpolicy {policy.kind} policy {args.policy} ({how}, action noise "
                f"{args.action_noise})",
                description=f"{args.episodes} episodes of {args.policy} on {env_id}, recorded by "
                f"trainers.collect with seed {args.seed}",
            )
        collector.close()
    finally:
        if previous is None:
            del os.environ["MINARI_DATASETS_PATH"]
        else:
            os.environ["MINARI_DATASETS_PATH"] = previous
    return np.asarray(returns), staging / dataset_id(args, env_id)


def data_checksums(dataset: Path) -> dict[str, str]:
    """{path under `dataset`: sha256} of every file of its data/ folder."""
    files = sorted(path for path in (dataset / "data").rglob("*") if path.is_file())
    return {str(path.relative_to(dataset)): sha256_bytes(path.read_bytes()) for path in files}


def collect(args: Args) -> np.ndarray:
    """Check everything, record, and move the dataset into `args.out`; returns the episode returns.
    ValueError: bad input (nothing written)."""
    check_args(args)
    require_extra("bc", ["minari", "h5py"], "python -m trainers.collect")
    policy = load_policy_arg(args.policy)
    env_id = args.env or policy.spec.env_id
    if env_id is None:
        raise ValueError(f"the policy {args.policy} records no env id; pass --env")
    env = make_env(env_id)
    try:
        env = checked(env, env_id)  # a bad observation or reward stops the recording, named
        check_spaces(policy, env, env_id)
        out = args.out.absolute()  # Minari mishandles relative dataset roots
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.") as staging:
            returns, written = record(policy, env, args, env_id, Path(staging))
            atomic_write_text(written / CHECKSUMS, json.dumps(data_checksums(written), indent=2) + "\n")
            if out.exists():
                shutil.rmtree(out)
            written.rename(out)
    finally:
        env.close()
    return returns


def main(argv=None) -> None:
    args = tyro_cli(Args, args=argv, description=__doc__, prog="python -m trainers.collect")
    try:
        returns = collect(args)
    except ValueError as err:
        fail(str(err), USAGE)
    except (MissingExtraError, HubRequestError) as err:
        fail(str(err), FAILURE)
    except KeyboardInterrupt:
        fail(f"interrupted (Ctrl-C); {KEPT}", INTERRUPTED)
    except OSError as err:
        fail(f"{write_failure(err)}; {KEPT}", FAILURE)
    print(
        f"recorded {returns.size} episodes, return {returns.mean():.1f} +/- {returns.std():.1f}, to {args.out}"
        f"\n  fit a flow policy to them: python -m trainers.bc --dataset {quote(args.out)}"
    )


if __name__ == "__main__":
    main()
