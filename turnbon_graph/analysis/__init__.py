"""Analyses of recorded runs: behaviours, selector preference, the judge, branch rollouts."""
