"""Settings every layer shares (the lowest layer: no torch, no I/O)."""

MLP_NHID = 50  # --classifiers mlp on the downstream tasks, when the configured classifier is logistic regression
