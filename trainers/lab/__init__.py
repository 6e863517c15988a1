"""The lab: the paper's experiments, timing scripts, claims and their reports; not part of the wheel."""
