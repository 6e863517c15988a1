"""JAX's persistent compilation cache, on by default: a run compiles its functions once per machine.

On a 2-core CPU a default run spends about a third of its time compiling, and every restart (a resumed
run, the next seed, the next test process) compiled the same functions again. JAX can keep compiled
executables on disk, keyed by the lowered program, the compile options and the JAX/XLA versions and
backend, so a hit is the executable a fresh compile would have produced.

Where the cache lives (`--compile-cache`, default "auto"):
- "auto": `$GSBPOLICY_COMPILE_CACHE` if set, else `$JAX_COMPILATION_CACHE_DIR` if set, else
  `$XDG_CACHE_HOME/gsbpolicy/jax` (`~/.cache/gsbpolicy/jax`);
- "off" (or `GSBPOLICY_COMPILE_CACHE=off` with "auto"): no persistent cache;
- anything else: that folder.

The same folder's `exported/` holds the Playground functions' traced programs (`exported_program`), which
spare a warm start the trace that finding a cached executable needs.

JAX decides whether to use the cache at a process's first compile; setting it later has no effect in that
process, which is why trainers set it before they build anything.
"""

import os
from pathlib import Path

import jax

ENV_VAR = "GSBPOLICY_COMPILE_CACHE"
"""Environment variable read by the default setting ("auto"): a folder, or "off"."""

MIN_COMPILE_SECONDS = 0.0
"""Every compiled function is stored, however quick its compile (JAX's default keeps only those that took
1 s or more; the variable JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS overrides both). Measured on a 2-core
CPU, a default run compiles about 48 functions: most of them (random-key splits, the acting function, small
reshapes) take 0.05-0.5 s each and together about 4 s, as much as the few big ones take to load, while
reading one entry back costs milliseconds and the whole folder stays under 1 MB per run configuration."""


def resolve(setting: str) -> Path | None:
    """The cache folder for a `--compile-cache` setting, or None when the cache is off."""
    if setting == "auto":
        setting = os.environ.get(ENV_VAR) or os.environ.get("JAX_COMPILATION_CACHE_DIR") or ""
        if not setting:
            base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
            return Path(base) / "gsbpolicy" / "jax"
    if setting == "off":
        return None
    return Path(setting).expanduser()


def exported_folder(setting: str) -> Path | None:
    """The folder of stored traced programs (`exported_program`) for a `--compile-cache` setting, or None."""
    folder = resolve(setting)
    return None if folder is None else folder / "exported"


def enable(setting: str) -> Path | None:
    """Point JAX's persistent compilation cache at the folder of `setting` (None: turn it off) and return it.

    Call before the process's first compile. An unusable folder (a file, no permission) is a clear error.
    """
    folder = resolve(setting)
    if folder is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(
            f"--compile-cache {str(folder)!r} cannot be used as a folder ({err.strerror})"
        ) from None
    if not os.access(folder, os.W_OK):
        raise ValueError(f"--compile-cache {str(folder)!r} is not writable (use another folder, or 'off')")
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:  # JAX's own variable wins
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return folder
