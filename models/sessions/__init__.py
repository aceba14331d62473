"""Gateway sessions: opening one creates its review when review is configured."""
