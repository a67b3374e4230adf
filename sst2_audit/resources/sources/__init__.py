"""Where resources come from: one module per source, each implementing interface.py; fetch() picks one."""

from sst2_audit.resources.sources import demo, hub, local, wheel
from sst2_audit.resources.sources.interface import FetchContext, Resource, StagedFile

SOURCES = {"hub": hub, "wheel": wheel, "demo": demo, "local": local}  # the lock's `source` -> its module


def fetch(resource: Resource, context: FetchContext) -> list:
    if context.import_dir is not None and resource.source == "hub":
        return local.fetch_import(resource, context)
    return SOURCES[resource.source].fetch(resource, context)


__all__ = ["FetchContext", "StagedFile", "fetch"]
