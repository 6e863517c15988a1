"""Shape-annotated array aliases shared by the whole package (one place, as in diffrax)."""

from jaxtyping import Array, Float, PRNGKeyArray

Obs = Float[Array, " obs_dim"]
Action = Float[Array, " act_dim"]
Scalar = Float[Array, ""]
Path = Float[Array, "num_steps_plus_1 act_dim"]
"""A discrete generation path a^(0:N); row n is a^(n)."""
Noise = Float[Array, "num_steps_plus_1 act_dim"]
"""Row 0 is a^(0) ~ N(0, I); row n+1 is the standard normal eps_n of Euler-Maruyama step n."""
StepValues = Float[Array, " num_steps"]
Drifts = Float[Array, "num_steps act_dim"]
Key = PRNGKeyArray
