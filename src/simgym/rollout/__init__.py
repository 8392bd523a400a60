"""Running many episodes."""
