"""Purlin: design, simulate and run GPU collectives."""
