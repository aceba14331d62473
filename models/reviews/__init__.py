"""Reviews: the state machine and the one service both the API and the chat bot call."""
