"""The model card (README.md): Hub metadata in the SB3 / huggingface_sb3 / LeRobot conventions, and a
body rendered from `card.md.jinja` with the numbers of the run's own files.

Metadata: `library_name: gsbpolicy`, tags (env id, reinforcement-learning, flow-matching, the algorithm,
robotics for robot bodies), license, and a `model-index` whose one result is task
`reinforcement-learning`, dataset = env id, metric `mean_reward` = "mean +/- std" (population std over
the final evaluation's episodes, as huggingface_sb3 writes it).
"""

import importlib.metadata
import inspect
import tomllib
from pathlib import Path

from gsbpolicy._internal import RunningNorm, env_kind

from .baselines import RESULTS_DIR, baseline_rows, method_name
from .command import SKIPPED, command_lines
from .curves import CURVE_NAME, eval_series
from .folder import ONNX_RUNTIME, CardSource, FolderError

TEMPLATE = Path(__file__).with_name("card.md.jinja")
ARXIV_ID = "2603.21621"
BIBTEX = """@article{gong2026gsbmdpo,
  title   = {Path-Space Mirror Descent for On-Policy Reinforcement Learning under the Generalized
             Schr{\\"o}dinger Bridge},
  author  = {Gong, Yuehu and Wang, Zeyuan and Chen, Yulin and Ding, Shutong and Zhou, Qingyuan and Fu, Yanwei},
  journal = {arXiv preprint arXiv:2603.21621},
  year    = {2026}
}"""
"""Title and authors as in the paper's LaTeX source (gsb-mdpo.tex)."""

ROBOT_ENVS = ("Ant", "HalfCheetah", "Hopper", "Humanoid", "Walker2d", "Swimmer", "Reacher", "Pusher",
              "Cheetah", "Walker", "Finger", "Go1", "Spot", "Berkeley", "Panda", "Aloha", "Leap", "G1", "H1",
              "T1", "Op3", "Apollo", "Barkour")  # fmt: skip
"""Env-name prefixes of simulated robot bodies (tagged `robotics`); pendulums and cartpoles are not."""


PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
CODE_URL_LABEL = "Repository"
"""The `[project.urls]` entry of pyproject.toml that the card links and installs from."""


def default_code_url() -> str:
    """gsbpolicy's code URL, from its one definition in pyproject.toml: read from the source tree when
    there is one (an editable install's metadata is as old as the install), else from the installed
    package's metadata."""
    if PYPROJECT.is_file():
        urls = tomllib.loads(PYPROJECT.read_text()).get("project", {}).get("urls", {})
        if CODE_URL_LABEL in urls:
            return urls[CODE_URL_LABEL]
    try:
        entries = importlib.metadata.metadata("gsbpolicy").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        entries = []
    for entry in entries:
        label, _, url = entry.partition(",")
        if label.strip() == CODE_URL_LABEL:
            return url.strip()
    raise FolderError(f"gsbpolicy's metadata has no {CODE_URL_LABEL} URL: pass --code-url URL")


def is_robot(env_id: str) -> bool:
    return env_id.startswith(ROBOT_ENVS)


def mean_reward(results: dict) -> str:
    return f"{results['mean']:.2f} +/- {results['std']:.2f}"


def default_repo_name(source: CardSource) -> str:
    """huggingface_sb3's naming: `<algo>-<env id>` (underscores as dashes)."""
    return f"{source.algo.replace('_', '-')}-{source.env_id}"


def card_data(source: CardSource, repo_id: str, license: str):
    from huggingface_hub import EvalResult, ModelCardData

    env_id, algo_tag = source.env_id, source.algo.replace("_", "-")
    generative = ["flow-matching"] if source.kind != "gaussian" else []
    tags = [env_id, "reinforcement-learning", "deep-reinforcement-learning", *generative, algo_tag]
    if is_robot(env_id):
        tags.append("robotics")
    tags.append("gsbpolicy")
    result = EvalResult(
        task_type="reinforcement-learning",
        task_name="reinforcement-learning",
        dataset_type=env_id,
        dataset_name=env_id,
        metric_type="mean_reward",
        metric_name="mean_reward",
        metric_value=mean_reward(source.results),
    )
    return ModelCardData(
        library_name="gsbpolicy",
        license=license,
        tags=tags,
        pipeline_tag="reinforcement-learning",
        model_name=repo_id.split("/")[-1],
        eval_results=[result],
    )


def _sigma_text(spec: dict) -> str:
    if spec["sigma_schedule"] == "constant":
        return f"= {spec['sigma_max']:g} (constant)"
    return f"{spec['sigma_schedule']} from {spec['sigma_max']:g} at t = 0 to {spec['sigma_min']:g} at t = 1"


SQUASHED = {"flow": "a^(N)", "gaussian": "The Gaussian sample u", "genpo": "z, the first half of x_N,"}
"""What the squash applies to, per policy kind."""


def _squash_text(spec: dict, kind: str) -> str:
    bounds = f"[{', '.join(f'{x:g}' for x in spec['action_low'])}] .. [{', '.join(f'{x:g}' for x in spec['action_high'])}]"
    if spec["squash"] == "tanh":
        return f"{SQUASHED[kind]} goes through tanh and is rescaled to the action bounds {bounds}."
    if spec["squash"] == "clip":
        return f"{SQUASHED[kind]} is clipped to the action bounds {bounds}."
    return f"{SQUASHED[kind]} is the action as it is (no squash)."


def _obs_clip(spec: dict) -> float:
    """The observation clip: a Gaussian actor's config does not record it, its normalizer has the default."""
    return spec.get("obs_clip", inspect.signature(RunningNorm.init).parameters["clip"].default)


def _modes(kind: str) -> tuple[str, str]:
    """The names of the deterministic and the stochastic policy: an ODE and an SDE for a flow policy."""
    return ("deterministic (ODE)", "stochastic (SDE)") if kind == "flow" else ("deterministic", "stochastic")


def _protocol(source: CardSource) -> str:
    results, args = source.results, source.run["args"]
    mode = _modes(source.kind)[0 if results["deterministic"] else 1]
    n = results["n_episodes"]
    if env_kind(source.env_id) == "gymnasium":
        where = (
            f"Gymnasium's `{source.env_id}` (its own time limit and termination), in a vector env seeded apart "
            f"from the training stream"
        )
    else:
        rollout = args["rollout"]
        where = (
            f"fresh MuJoCo Playground `{source.env_id}` envs, one episode of at most "
            f"{rollout['episode_length']} control steps each (action repeat {rollout['action_repeat']})"
        )
    text = (
        f"After training, the {mode} policy ran {n} episodes in {where}. A return is the undiscounted sum of "
        f"the env's rewards; the model-index value `mean_reward` is their mean +/- population std."
    )
    if env_kind(source.env_id) == "gymnasium":
        text += f" Re-run it with `gsbpolicy.evaluate(policy, {source.env_id!r}, n_episodes={n})`."
    return text


def _curve_protocol(args: dict, env_id: str, kind: str) -> str:
    evaluation = args.get("eval")
    if evaluation is None:  # behaviour cloning (trainers.bc) evaluates once, after the fit
        return f"once, after the fit, {args['eval_episodes']} episodes with the {_modes(kind)[0]} policy."
    if evaluation["interval_steps"] > 0:
        when = f"every {evaluation['interval_steps']:,} env steps and at the end"
    else:
        when = f"at {evaluation['num_evals']} points spread evenly over training"
    if env_kind(env_id) == "gymnasium":
        size = f"{evaluation['episodes']} episodes"
    else:
        size = f"{evaluation['num_envs']} fresh envs"
    deterministic, stochastic = _modes(kind)
    return f"{when}, {size} each, with the {deterministic} and the {stochastic} policy."


def _flatten(args: dict) -> list[tuple[str, str]]:
    rows = []
    for name, value in args.items():
        if name in SKIPPED:
            continue
        if isinstance(value, dict):
            rows += [(f"{name}.{field}", str(inner)) for field, inner in value.items()]
        else:
            rows.append((name, str(value)))
    return rows


def _numbers(values: list, fmt: str) -> str:
    return ", ".join(format(v, fmt) for v in values)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "an unrecorded time"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def _hardware(device: dict) -> str:
    kind, count = device.get("device_kind", "?"), device.get("device_count", 1)
    text = f"{count} x {kind}" if device.get("platform") != "cpu" else "CPU only"
    return f"{text} ({device.get('cpu_count', '?')} CPU cores, {device.get('machine', '?')})"


def render_card(
    source: CardSource,
    repo_id: str,
    *,
    license: str = "apache-2.0",
    has_onnx: bool = False,
    contract: dict | None = None,
    video_steps: int | None = None,
    results_dir: Path = RESULTS_DIR,
    code_url: str | None = None,
) -> str:
    """The README.md text. `contract`: policy.onnx's shape fields and robot contract
    (`export.inspect.contract_json`), shown as a table;
    `video_steps`: the length of replay.mp4 in env steps if the repo has one;
    `code_url`: where gsbpolicy's code is (default: pyproject.toml's, see `default_code_url`)."""
    from huggingface_hub import ModelCard

    eval_series(source.metrics)  # fail early on a run without evaluation records
    card = ModelCard.from_template(
        card_data(source, repo_id, license),
        template_str=TEMPLATE.read_text(),
        repo_id=repo_id,
        code_url=code_url or default_code_url(),
        onnx_runtime=ONNX_RUNTIME,
        arxiv_id=ARXIV_ID,
        has_onnx=has_onnx,
        contract_rows=contract_rows(contract) if contract is not None else None,
        has_video=video_steps is not None,
        video_steps=video_steps,
        baselines=baseline_rows(source.env_id, results_dir),
        curve_name=CURVE_NAME,
        bibtex=BIBTEX,
        **_policy_fields(source),
        **_run_fields(source),
    )
    return str(card).rstrip("\n") + "\n"


def _entries(names: list[str], units: list[str], low=None, high=None) -> str:
    entries = []
    for i, (name, unit) in enumerate(zip(names, units, strict=True)):
        bounds = f" in [{low[i]:g}, {high[i]:g}]" if low is not None and high is not None else ""
        entries.append(f"`{name}`" + (f" ({unit})" if unit else "") + bounds)
    return ", ".join(entries)


def contract_rows(data: dict) -> list[tuple[str, str]]:
    """(field, value) rows of the card's contract table, from policy.onnx's `export.inspect.contract_json`."""
    contract = data["contract"]
    sampler, provenance, dt = contract["sampler"], contract["provenance"], contract["control_dt"]
    noise = ", ".join(map(str, data["noise_shape"]))
    inputs = "`obs` [B, obs_dim]" + (
        f", `noise` [B, {noise}] standard normal" if data["mode"] == "sde" else ""
    )
    steps = "none (a Gaussian policy)" if sampler["steps"] is None else f"{sampler['steps']} Euler steps"
    exact = "" if sampler["exact"] else f" ({sampler['note']})"
    ret = provenance["final_return"]
    episodes = provenance["final_return_episodes"]
    return [
        (
            "observations (raw: the normaliser is inside the graph)",
            _entries(contract["obs_names"], contract["obs_units"]),
        ),
        (
            "actions",
            _entries(contract["act_names"], contract["act_units"], data["action_low"], data["action_high"]),
        ),
        ("inputs", inputs),
        ("control period", "unknown" if dt is None else f"{dt:g} s"),
        ("sampler", f"{steps}, mode {sampler['mode']}, squash {sampler['squash']}{exact}"),
        (
            "env",
            f"{provenance['env_id']} (version {provenance['env_version']}), gymnasium "
            f"{provenance['gymnasium_version']}, mujoco {provenance['mujoco_version']}",
        ),
        (
            "training",
            f"commit `{provenance['training_commit']}`, seed {provenance['seed']}, "
            f"{provenance['env_steps']} env steps, final return "
            f"{'unknown' if ret is None else f'{ret:.1f}'} over {episodes} episodes",
        ),
        ("weights sha256", f"`{provenance['tensors_sha256']}`"),
        ("contract version", contract["contract_version"]),
    ]


def _policy_fields(source: CardSource) -> dict:
    """What the card says of the policy: its kind, spec, sampler and how it meets the env."""
    # Behaviour cloning (trainers.bc, Gymnasium envs only) has no rollout; only the Playground snippet reads it.
    rollout = source.run["args"].get("rollout", {"episode_length": 0, "action_repeat": 1})
    return {
        "env_id": source.env_id,
        "env_entry_point": source.results.get("env_entry_point"),
        "method": method_name(source.algo),
        "kind": source.kind,
        "spec": source.spec,
        "mix": source.config.get("mix"),
        "sigma_text": _sigma_text(source.spec) if source.kind == "flow" else "",
        "squash_text": _squash_text(source.spec, source.kind),
        "obs_clip": _obs_clip(source.spec),
        "is_gym": env_kind(source.env_id) == "gymnasium",
        "episode_length": rollout["episode_length"],
        "action_repeat": rollout["action_repeat"],
        "agent_steps": -(-rollout["episode_length"] // rollout["action_repeat"]),
    }


def _run_fields(source: CardSource) -> dict:
    """What the card says of the run: results, protocol, command, provenance and hyperparameters."""
    run, results = source.run, source.results
    train = [r for r in source.metrics if r["type"] == "train"]
    git = run["git"]
    return {
        "results": results,
        "mean_reward": mean_reward(results),
        "protocol": _protocol(source),
        "curve_protocol": _curve_protocol(run["args"], source.env_id, source.kind),
        "returns_text": _numbers(results["returns"], ".1f"),
        "lengths_text": _numbers(results["lengths"], "d"),
        "commit": git.get("commit") or results["git_commit"] or "unknown",
        "dirty": bool(git.get("dirty")),
        "command": " \\\n    ".join(command_lines(run)),
        "iterations": train[-1]["iteration"] if train else "?",
        "wall_text": _duration(train[-1].get("time/wall_s") if train else None),
        "hardware": _hardware(run["device"]),
        "started": run.get("started", "at an unrecorded time"),
        "hyperparameters": _flatten(run["args"]),
        "packages": sorted((name, version or "not installed") for name, version in run["packages"].items()),
        "init": run.get("init"),
        "path_kl_init": next(
            (r["train/path_kl_init"] for r in reversed(train) if "train/path_kl_init" in r), None
        ),
    }
