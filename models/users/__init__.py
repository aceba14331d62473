"""Organizations and users: sign-up on first sight, profiles, admin changes, who is calling."""
