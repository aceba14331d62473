"""Time-based rules: reviews that expire, reminders, and JIT access that ends."""
