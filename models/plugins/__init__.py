"""Plugins: their connections and their sealed top-level configuration."""
