"""Types, contract, environment: the part of simgym everything else builds on."""
