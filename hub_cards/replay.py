"""replay.mp4: one episode of the deterministic policy, as huggingface_sb3 uploads with its models.

Optional by nature: it needs a video encoder (imageio with the imageio-ffmpeg binary, the `hub` extra)
and MuJoCo offscreen rendering (EGL or OSMesa; no display). When either is missing the publisher goes
on without the video and says why.
"""

import os
import warnings
from pathlib import Path

from gsbpolicy._internal import env_kind
from gsbpolicy.gym import makeable_env_id


class ReplayUnavailable(RuntimeError):
    """The video cannot be made here (no encoder, no renderer, or not a Gymnasium env)."""


def _encoder():
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg
    except ImportError as err:
        raise ReplayUnavailable(
            f'no video encoder ({err.name} is not installed: pip install -c tests/constraints.txt -e ".[hub]")'
        ) from err
    try:
        imageio_ffmpeg.get_ffmpeg_exe()
    except RuntimeError as err:
        raise ReplayUnavailable(f"no ffmpeg binary ({err})") from err
    return imageio


def _rendering_env(env_id: str, width: int, height: int, seed: int):
    """A Gymnasium env in rgb_array mode that has rendered one frame, and the first observation."""
    import gymnasium

    # Headless machines need an offscreen GL backend; gymnasium reads MUJOCO_GL when the renderer is
    # made (at the first render), so the variable is only set for that moment. A backend the user chose
    # is kept; otherwise EGL, then OSMesa.
    chosen = os.environ.get("MUJOCO_GL")
    errors = []
    try:
        for backend in [chosen] if chosen else ["egl", "osmesa"]:
            os.environ["MUJOCO_GL"] = backend
            env = None
            try:
                env = gymnasium.make(env_id, render_mode="rgb_array", width=width, height=height)
                obs, _ = env.reset(seed=seed)
                env.render()
                return env, obs
            except Exception as err:  # every GL failure (import, context, framebuffer) means "not here"
                errors.append(f"MUJOCO_GL={backend}: {type(err).__name__}: {err}")
                if env is not None:
                    env.close()
    finally:
        if chosen is None:
            os.environ.pop("MUJOCO_GL", None)
    raise ReplayUnavailable("MuJoCo rendering is unavailable (" + "; ".join(errors) + ")")


def record_replay(
    policy,
    env_id: str,
    out: Path,
    *,
    max_steps: int = 500,
    seed: int = 0,
    width: int = 320,
    height: int = 240,
) -> int:
    """Write `out` (mp4, H.264) of one deterministic episode of `policy` (a `GSBPolicy`), cut at
    `max_steps`; returns the number of steps recorded. Frame sizes are multiples of 16 so ffmpeg need not
    resize."""
    if env_kind(env_id) != "gymnasium":
        raise ReplayUnavailable(
            f"{env_id!r} is a Playground task: replays are rendered for Gymnasium envs only"
        )
    try:  # a "custom/" id train() registered: made again from the entry point the policy's folder records
        env_id = makeable_env_id(env_id, policy)
    except ValueError as err:
        raise ReplayUnavailable(str(err)) from None
    imageio = _encoder()
    env, obs = _rendering_env(env_id, width, height, seed)
    try:
        frames = [env.render()]
        for _ in range(max_steps):
            action, _ = policy.predict(obs, deterministic=True)
            obs, _, terminated, truncated, _ = env.step(action)
            frames.append(env.render())
            if terminated or truncated:
                break
        fps = env.metadata.get("render_fps") or 30
    finally:
        env.close()
    tmp = out.with_name(f".{out.name}.encoding.mp4")  # the extension tells ffmpeg the container
    try:
        with warnings.catch_warnings():
            # JAX warns on any fork; the encoder's fork is subprocess's fork+exec of ffmpeg, which runs
            # no Python (hence no JAX) code in the child, so the deadlock it warns of cannot happen.
            warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
            with imageio.get_writer(tmp, fps=fps, codec="libx264", pixelformat="yuv420p") as writer:
                for frame in frames:
                    writer.append_data(frame)
        os.replace(tmp, out)  # same folder: readers never see half a video
    finally:
        tmp.unlink(missing_ok=True)
    return len(frames) - 1
