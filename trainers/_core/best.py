"""`--log.keep-best`: the best evaluated policy of a run, kept beside its last one.

At an evaluation that beats every earlier one, the policy is saved as a candidate (`best_policy.pending`); the
candidate becomes `best_policy` when the next checkpoint is committed, so the best kept always belongs to the
evaluations a resume keeps. A passive part of the run folder: the loop saves the policy into the folder
`candidate` names, this module only moves and labels folders.
"""

import json
import shutil
from pathlib import Path

from gsbpolicy._files import atomic_write_text

BEST_POLICY, BEST_PENDING, BEST_RECORD = "best_policy", "best_policy.pending", "best.json"
"""The folder of the best evaluated policy, the candidate written at an evaluation, and the record inside both
saying which evaluation it was."""


class BestPolicy:
    """The best-policy folders of the run folder `run_dir` (of a run of `algo` on `env_id` evaluated with
    `episodes` episodes). `writer=False` (processes other than 0) keeps the best value and writes nothing."""

    def __init__(self, run_dir: Path, algo: str, env_id: str, episodes: int, writer: bool = True):
        self.best, self.pending = run_dir / BEST_POLICY, run_dir / BEST_PENDING
        self.algo, self.env_id, self.episodes, self.writer = algo, env_id, episodes, writer
        self.value = None  # the best deterministic evaluation return so far (checkpoints carry it)

    def settle(self, checkpointed: int) -> None:
        """At a resume, the candidate left by the interrupted attempt: the best if the checkpoint of iteration
        `checkpointed` resumed covers its evaluation (a kill between the commit and the promotion), else gone
        with the evaluations the resume discards."""
        if not (self.writer and self.pending.is_dir()):
            return
        if json.loads((self.pending / BEST_RECORD).read_text())["iteration"] <= checkpointed:
            self.promote()
        else:
            shutil.rmtree(self.pending)

    def candidate(self, record: dict) -> Path | None:
        """The (emptied) folder to save the policy of the eval `record` into when it beats every earlier one;
        None when it does not, or when this process does not write."""
        value = record["eval/return_deterministic"]
        if self.value is not None and value <= self.value:
            return None
        self.value = value
        if not self.writer:
            return None
        if self.pending.is_dir():
            shutil.rmtree(self.pending)
        return self.pending

    def label(self, record: dict) -> None:
        """Write the candidate's record: which evaluation (the eval `record`) it was and what it scored."""
        best = {
            "label": "the best deterministic evaluation during training (policy/ is the last iteration's)",
            "env_id": self.env_id,
            "algo": self.algo,
            "iteration": record["iteration"],
            "env_steps": record["env_steps"],
            "mean": record["eval/return_deterministic"],
            "std": record["eval/return_deterministic_std"],
            "n_episodes": self.episodes,
        }
        atomic_write_text(self.pending / BEST_RECORD, json.dumps(best, indent=2) + "\n")

    def promote(self) -> None:
        """After a checkpoint is committed: the candidate, if any, becomes `best_policy/`."""
        if not (self.writer and self.pending.is_dir()):
            return
        if self.best.is_dir():
            shutil.rmtree(self.best)
        self.pending.rename(self.best)
