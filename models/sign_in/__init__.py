"""Sign-in: local bearer tokens, the OpenID provider, and sign-in attempts in flight."""
