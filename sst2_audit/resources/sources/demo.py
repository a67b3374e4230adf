"""The embedded demo sets: reviewable TSV or JSONL in this repository, turned into parquet."""

from sst2_audit.task.dataset import read_demo, write_parquet
from sst2_audit.formats.fields import columns_of
from sst2_audit.util.errors import InputError, mismatch
from sst2_audit.util.hashing import sha256_file
from sst2_audit.resources.sources.interface import FetchContext, StagedFile, cache_path_for


def fetch(resource, context: FetchContext) -> list:
    staged_files = []
    for locked in resource.files:
        origin = context.lock.folder / locked.path
        if not origin.is_file():
            raise InputError(f"{origin}: demo data file is missing.")
        actual = sha256_file(origin)
        if locked.sha256 and actual != locked.sha256:
            raise InputError(mismatch(f"{origin}: sha256", locked.sha256, actual,
                                      "The demo set was edited; review it and update the lock."))
        columns = columns_of(resource)
        rows = read_demo(origin, columns)
        if locked.rows is not None and len(rows) != locked.rows:
            raise InputError(mismatch(f"{origin}: row count", locked.rows, len(rows)))
        cache_path, role = cache_path_for(resource, locked)
        staged = context.staging / cache_path
        staged.parent.mkdir(parents=True, exist_ok=True)
        write_parquet(rows, staged, columns)
        # The parquet is derived; the lock pins its TSV source, checked above.
        staged_files.append(StagedFile(cache_path, role, staged,
                                       f"parquet written from {locked.path} (sha256 {actual})", None))
    return staged_files
