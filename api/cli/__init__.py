"""The ``accessgate`` command line and the HTTP clients it drives (sign-in, the sidecar)."""
