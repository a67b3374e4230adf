"""Where resources come from: one module per source behind interface.fetch()."""

from .interface import FetchContext, StagedFile, fetch

__all__ = ["FetchContext", "StagedFile", "fetch"]
