"""Pre-register the toy's claim: the framework's `trainers.benchmark.preregistration`, whose `--source toy` is
the toy's interval test on fresh seeds of the toy sweep at the paper's setting.

    python -m trainers.lab.toy_registration --id toy-l1 --claim "toy: quadrant-mass L1 error about 0.100" \\
        --source toy --test interval --paper-value 0.1 --num-seeds 10
"""

from gsbpolicy._cli import CommandError
from trainers.benchmark.preregistration import Args, fresh_seeds, main, rule_fingerprint
from trainers.lab.toy import tilt_settings as toy_tilt


def toy_part(args: Args) -> dict:
    """The toy's part of a registration: its settings, the paper's preference at beta 1, fresh seeds, the paper's
    value, the command that runs them and the fingerprint of the rule that judges them."""
    if args.paper_value is None or args.num_seeds is None:
        raise CommandError("the toy's interval test needs --paper-value and --num-seeds")
    seeds = fresh_seeds(args, args.num_seeds)
    return {
        "settings": toy_tilt.settings(toy_tilt.Args()),
        "beta": 1.0,
        "preference": list(toy_tilt.PAPER_PREFERENCE),
        "seeds": seeds,
        "paper_value": args.paper_value,
        "run": "python -m trainers.lab.toy --sweep --sweep-betas 1 --sweep-quadrants 3 --sweep-seeds "
        + " ".join(map(str, seeds)),
        "fingerprint": rule_fingerprint("judge_toy"),
    }


if __name__ == "__main__":
    main(source_part=toy_part, module="trainers.lab.toy_registration")
