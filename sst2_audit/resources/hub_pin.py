"""Hub sources for prepare.py --pin: `hub:ORG/NAME@REVISION`, resolved to its commit and every chosen
file downloaded and hashed through the real huggingface_hub client (it honours HF_ENDPOINT)."""

import contextlib
import tempfile
from pathlib import Path

from sst2_audit.util.errors import InputError

PREFIX = "hub:"


def is_hub(source) -> bool:
    return str(source).startswith(PREFIX)


def parse(source, option: str) -> tuple:
    """('org/name', 'revision') of `hub:org/name@revision`."""
    text = str(source)[len(PREFIX):]
    repo_id, at, revision = text.rpartition("@")
    if not at or not revision or repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise InputError(f"{option} {source}: expected hub:ORG/NAME@REVISION (a branch, tag or commit).")
    return repo_id, revision


@contextlib.contextmanager
def snapshot(source, repo_type: str, choose, option: str):
    """(commit, {path in the repo: downloaded file}) of the files `choose(names)` picks, downloaded into a temporary
    folder removed when the block ends (each pin left its download behind before)."""
    from huggingface_hub import HfApi

    api = HfApi()
    with tempfile.TemporaryDirectory(prefix="sst2-audit-pin-") as folder:
        yield _downloaded(api, source, repo_type, choose, option, folder)


def _downloaded(api, source, repo_type: str, choose, option: str, folder: str) -> tuple:
    import requests
    from huggingface_hub import hf_hub_download
    from huggingface_hub import errors as hub_errors

    repo_id, revision = parse(source, option)
    try:
        info = (api.model_info if repo_type == "model" else api.dataset_info)(repo_id, revision=revision)
        names = [sibling.rfilename for sibling in info.siblings or []]
        chosen = choose(names)
        files = {name: Path(hf_hub_download(repo_id, name, repo_type=repo_type, revision=info.sha, cache_dir=folder))
                 for name in chosen}
    except hub_errors.RevisionNotFoundError:
        raise InputError(f"{option} {source}: the hub has no revision {revision!r} of {repo_id}.") from None
    except hub_errors.RepositoryNotFoundError:
        raise InputError(f"{option} {source}: the hub has no {repo_type} repository {repo_id}.") from None
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout, OSError) as error:
        raise InputError(f"{option} {source}: the hub could not be reached ({type(error).__name__}); pin a local "
                         "folder instead, or set HF_ENDPOINT.") from None
    if not (isinstance(info.sha, str) and len(info.sha) == 40):
        raise InputError(f"{option} {source}: the hub resolved {revision!r} to {info.sha!r}, not a 40-digit commit.")
    return info.sha, files


def dataset_file(names: list, split: str, source) -> str:
    """The one parquet file of a split in a dataset repo (`<split>-*.parquet`, `<split>.parquet` or `<split>/…`)."""
    found = [n for n in names if n.endswith(".parquet") and (
        Path(n).name.startswith(f"{split}-") or Path(n).name == f"{split}.parquet" or split in Path(n).parts[:-1])]
    if len(found) != 1:
        raise InputError(f"--data {source}: expected one parquet file for split {split!r}, found "
                         f"{found or 'none'} (sharded splits are not supported yet).")
    return found[0]
