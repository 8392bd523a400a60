"""Adapters that put simgym's simulated environments behind other programs' interfaces."""
