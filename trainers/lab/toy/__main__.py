"""`python -m trainers.lab.toy [--sweep] ...`: the toy analysis, one run or the sweep (`tilt_sweep`)."""

from .tilt_sweep import main

if __name__ == "__main__":
    main()
