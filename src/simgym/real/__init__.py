"""Real environments that produce ground truth for the simulated ones."""
