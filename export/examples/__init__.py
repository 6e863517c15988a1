"""Examples of running exported policies."""
