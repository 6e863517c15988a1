"""Algorithm-independent training machinery: env adapters, rollouts, GAE, minibatching, loop, logging."""
