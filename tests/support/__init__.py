"""What the tests share besides fixtures (tests/conftest.py holds only the fixtures and pytest's hooks): where
the inputs are (paths.py), how a command is run as a user runs it (processes.py), and how the shared runs, caches,
locks and tiny models are built (builders.py)."""
