"""A point mass on a plane, written as a pure-JAX MuJoCo Playground env and registered on import: how you
bring your own JAX env (`--env tests.jax_point_mass:PointMass`), and the tests' cheap stand-in for an MJX
task where what is under test is the training machinery, not the physics. Its step is a few array ops, so a
training iteration around it compiles in seconds, where an MJX task's step alone takes 10-40 s on 2 cores.

The MuJoCo model only declares the two actuators, whose control range the trainer reads as the action
bounds; the dynamics are written out below (semi-implicit Euler, light damping).
"""

import jax
import jax.numpy as jnp
import mujoco
from ml_collections import config_dict
from mujoco import mjx
from mujoco_playground import MjxEnv, State, dm_control_suite

NAME = "PointMass"

XML = """
<mujoco model="point_mass">
  <worldbody>
    <body name="mass">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="y" type="slide" axis="0 1 0"/>
      <geom type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="x" ctrlrange="-1 1" ctrllimited="true"/>
    <motor joint="y" ctrlrange="-1 1" ctrllimited="true"/>
  </actuator>
</mujoco>
"""


def default_config() -> config_dict.ConfigDict:
    # `impl` is there because the trainer asks every Playground env for the pure-JAX MJX backend.
    return config_dict.create(ctrl_dt=0.05, sim_dt=0.05, damping=0.1, impl="jax")


class PointMass(MjxEnv):
    """Push a unit mass from a random start in [-1, 1]^2 to the origin; reward exp(-|position|^2)."""

    def __init__(self, config=None, config_overrides=None):
        super().__init__(config or default_config(), config_overrides)
        self._model = mujoco.MjModel.from_xml_string(XML)

    def reset(self, rng: jax.Array) -> State:
        data = {"pos": jax.random.uniform(rng, (2,), minval=-1.0, maxval=1.0), "vel": jnp.zeros(2)}
        return State(data, self._obs(data), jnp.zeros(()), jnp.zeros(()), {}, {})

    def step(self, state: State, action: jax.Array) -> State:
        vel = state.data["vel"] + self.dt * (action - self._config.damping * state.data["vel"])
        data = {"pos": state.data["pos"] + self.dt * vel, "vel": vel}
        reward = jnp.exp(-jnp.sum(jnp.square(data["pos"])))
        return state.replace(data=data, obs=self._obs(data), reward=reward)

    @staticmethod
    def _obs(data) -> jax.Array:
        return jnp.concatenate([data["pos"], data["vel"]])

    @property
    def xml_path(self) -> str:
        return "<string>"

    @property
    def action_size(self) -> int:
        return self._model.nu

    @property
    def mj_model(self) -> mujoco.MjModel:
        return self._model

    @property
    def mjx_model(self) -> mjx.Model:
        return mjx.put_model(self._model)


dm_control_suite.register_environment(NAME, PointMass, default_config)
