"""Room 5, scoring: the two paths that score (official: lm-eval's simple_evaluate; independent: our own
forward pass), the model loader, and the checks between them (identity, agreement, summaries)."""
