"""Connections: the databases and servers users open sessions against."""
