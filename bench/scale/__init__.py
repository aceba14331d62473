"""The scale benchmark: `make bench-scale`."""
