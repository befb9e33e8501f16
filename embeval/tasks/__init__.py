"""The task registry (every task fact on its entry), the loaders of SentEval's files and the task data types."""
