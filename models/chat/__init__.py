"""The chat bot's side of the domain: its runtime contract, account links, cards and posted
messages. Transport-free: the Slack code lives in ``bot/``."""
