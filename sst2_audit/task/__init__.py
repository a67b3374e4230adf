"""Room 4, task: the task as data (one safe YAML reading, the task spec, the support policy, few-shot
re-derivation, hooks, groups, dataset rows, the hash-ordered split, the evaluator's pinned files)."""
