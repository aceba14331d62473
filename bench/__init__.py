"""Benchmarks of the service, run by ``make bench``."""
