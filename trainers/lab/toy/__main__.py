"""`python -m trainers.lab.toy [--sweep] ...`: the toy analysis, one run or the sweep (`tilt_sweep`)."""

from .tilt_model import main

if __name__ == "__main__":
    main()
