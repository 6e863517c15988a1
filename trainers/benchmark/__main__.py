"""`python -m trainers.benchmark --suite NAME ...`: the suite runner (`trainers.benchmark.runner`)."""

from .runner import main

if __name__ == "__main__":
    main()
