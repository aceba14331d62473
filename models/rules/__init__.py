"""Access request rules: which groups review sessions on which connections, and how."""
