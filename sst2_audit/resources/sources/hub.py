"""The Hugging Face hub, through the real huggingface_hub client (honours HF_ENDPOINT).

Each file is checked against the hub's own content hash for the pinned
revision: the LFS sha256 for large files, the git blob sha1 for small ones.
"""

import re
from pathlib import Path

from sst2_audit.formats.manifest import is_weight_file
from sst2_audit.resources.sources.interface import cache_path_for, FetchContext, StagedFile
from sst2_audit.util.errors import CheckFailed, InputError
from sst2_audit.util.hashing import git_blob_sha1, sha256_file
from sst2_audit.util.progress import say

WAYS_FORWARD = (
    "Two ways forward without the hub: `sst2-audit prepare --profile embedded` (the offline demo), "
    "or copy the pinned files on a connected machine and import them with `--from DIR` "
    "(laid out as DIR/<repo_id>/<path>, verified the same way)."
)


REASONS = (
    (re.compile(r"Failed to resolve \\?'([^'\\]+)"), "cannot resolve host {}"),
    (re.compile(r"Connection refused"), "connection refused"),
    (re.compile(r"timed out", re.I), "timed out"),
    (re.compile(r"offline", re.I), "offline mode is on (HF_HUB_OFFLINE)"),
)


def _reason(error) -> str:
    """The innermost cause in a few words: urllib3 nests the real reason deep in its message."""
    text = str(error)
    for pattern, words in REASONS:
        found = pattern.search(text)
        if found:
            return words.format(*found.groups())
    return text.splitlines()[0][:120] if text else "no detail"


def _unreachable(resource, error) -> InputError:
    return InputError(
        f"The hub could not be reached for {resource.get('repo_id')}@{resource.get('revision')} "
        f"({type(error).__name__}: {_reason(error)}). " + WAYS_FORWARD
    )


PROBE_SECONDS = 5


def _probe(resource) -> None:
    """One request without retries before the hub client's own (which backs off for about 25 s on
    a refused connection): an unreachable hub fails in seconds with the ways forward."""
    import requests
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return  # the client's own offline error says it
    try:
        requests.head(constants.ENDPOINT, timeout=PROBE_SECONDS, allow_redirects=False)
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as error:
        raise _unreachable(resource, error) from None


def _check_hub_hash(path: Path, etag: str, label: str) -> None:
    if len(etag) == 64:
        actual, kind = sha256_file(path), "LFS sha256"
    elif len(etag) == 40:
        actual, kind = git_blob_sha1(path), "git blob sha1"
    else:
        raise CheckFailed(f"{label}: the hub sent an ETag {etag!r} that is neither a sha256 nor a git sha1.")
    if actual != etag:
        raise CheckFailed(f"{label}: hub {kind} expected {etag}, downloaded file has {actual}.")


def fetch(resource, context: FetchContext) -> list:
    import requests
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url
    from huggingface_hub import errors as hub_errors


    repo_id, repo_type, revision = resource.get("repo_id"), resource.get("repo_type"), resource.get("revision")
    _probe(resource)
    download_dir = context.staging / "hub-download"
    staged_files = []
    for number, locked in enumerate(resource.files, start=1):
        if not context.weights and resource.kind == "model" and is_weight_file(locked.path):
            continue  # prepare --no-weights: never downloaded (a 7B model's 14 GB)
        label = f"{repo_id}@{revision[:12]}/{locked.path}"
        say(f"[prepare] {resource.kind} file {number}/{len(resource.files)}: {label}")
        try:
            url = hf_hub_url(repo_id, locked.path, repo_type=repo_type, revision=revision)
            metadata = get_hf_file_metadata(url)
            if metadata.commit_hash != revision:
                raise CheckFailed(
                    f"{label}: the hub resolved revision {revision} to commit "
                    f"{metadata.commit_hash}; expected exactly the pinned commit."
                )
            downloaded = Path(hf_hub_download(
                repo_id, locked.path, repo_type=repo_type, revision=revision, local_dir=download_dir,
            ))
        except (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                hub_errors.OfflineModeIsEnabled, hub_errors.LocalEntryNotFoundError) as error:
            raise _unreachable(resource, error) from None
        except hub_errors.RevisionNotFoundError:
            raise CheckFailed(f"{label}: revision {revision} does not exist on the hub "
                              "(wrong revision pinned?).") from None
        except hub_errors.EntryNotFoundError:
            raise CheckFailed(f"{label}: the file does not exist at revision {revision}.") from None
        except hub_errors.RepositoryNotFoundError:
            raise CheckFailed(f"{label}: repository {repo_id} ({repo_type}) not found on the hub.") from None
        except requests.exceptions.ChunkedEncodingError as error:
            raise CheckFailed(f"{label}: download failed, the connection broke mid-file (truncated download: "
                              f"{str(error)[:160]}). Nothing was written to the cache.") from None
        except (OSError, hub_errors.HfHubHTTPError) as error:
            raise CheckFailed(f"{label}: download failed ({type(error).__name__}: {error}).") from None
        if metadata.size is not None and downloaded.stat().st_size != metadata.size:
            raise CheckFailed(
                f"{label}: expected {metadata.size} bytes from the hub, got {downloaded.stat().st_size} (truncated "
                "download)."
            )
        _check_hub_hash(downloaded, (metadata.etag or "").strip('"'), label)
        cache_path, role = cache_path_for(resource, locked)
        staged = context.staging / cache_path
        staged.parent.mkdir(parents=True, exist_ok=True)
        downloaded.replace(staged)
        staged_files.append(StagedFile(cache_path, role, staged, f"hub {repo_type} {label}", locked))
    return staged_files
