"""sst2-audit: prove, question by question, how an lm-eval multiple-choice result was computed (SST-2 is
the reference task). The folders are rooms by job, imported bottom to top only: util < protocol < formats
< task < scoring < resources < pages < run < audit < bundle < cli (tests/project/test_layers.py reads this order)."""

__version__ = "0.1.0"
