"""sst2-audit: prove, question by question, how an SST-2 accuracy was computed."""

__version__ = "0.1.0"
