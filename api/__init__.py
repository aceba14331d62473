"""The HTTP transport of accessgate: FastAPI app, routes, error mapping and the CLI."""
