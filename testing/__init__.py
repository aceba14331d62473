"""Stand-ins for the outside world that tests and benchmarks both run, never shipped.

``postgres`` starts throwaway PostgreSQL clusters, ``processes`` runs the ``accessgate`` command
line as a user would, ``oidc_provider`` a real OpenID provider on loopback, and ``slack`` a Slack
workspace speaking Slack's wire protocols to the real slack_sdk / slack_bolt clients.
"""
