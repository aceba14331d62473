"""The Slack transport of accessgate: review cards and their buttons.

It calls the same ``models`` services as the REST API and never imports ``api``.
"""
