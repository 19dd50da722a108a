"""``vdlib export --push-to-hub REPO``: the exported dataset uploaded to the Hugging Face Hub as
a dataset repository, guarded.

The upload needs a token and a network. :func:`hub_token` checks both before anything is
written or sent and fails with one line: ``HF_HUB_OFFLINE`` set to a true value (``1``,
``true``, ``yes``, ``on``) refuses, and so does a missing ``HF_TOKEN``. The token is read from
the environment only, handed to ``huggingface_hub.HfApi`` and nowhere else: no card or file of
the export holds it. :func:`push_dataset` uploads the card and the parquet files (``README.md``,
``data/``), not the Arrow copy (``arrow/``, for ``load_from_disk`` on this machine) and not the
checkpoints (each is a model repository of its own: upload one with
``huggingface-cli upload REPO DIR/checkpoints/iter_<t>/<role>_model``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vdlib.export.curricula import PARQUET_DIR
from vdlib.export.run_folder import ExportError

__all__ = ["hub_token", "push_dataset", "PUSHED_PATTERNS", "TOKEN_VARIABLE"]

logger = logging.getLogger(__name__)

#: the environment variable the token comes from
TOKEN_VARIABLE = "HF_TOKEN"
#: what is uploaded: the card and the parquet files
PUSHED_PATTERNS = ["README.md", f"{PARQUET_DIR}/*.parquet"]
_TRUE = {"1", "true", "yes", "on"}


def hub_token(repo: str, env: Mapping[str, str] | None = None) -> str:
    """The token for pushing to ``repo``, or an :class:`ExportError` (one line) when the Hub
    cannot be reached from here (``HF_HUB_OFFLINE``), the token is missing or ``repo`` is not
    ``owner/name``."""
    env = os.environ if env is None else env
    parts = repo.split("/")
    if len(parts) != 2 or not all(parts):
        raise ExportError(f"--push-to-hub {repo!r}: give the dataset repository as owner/name")
    if env.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        raise ExportError("--push-to-hub needs the network, and HF_HUB_OFFLINE is set: nothing "
                          "was written; run the command where huggingface.co is reachable, "
                          "with HF_HUB_OFFLINE unset (or export without --push-to-hub)")
    token = env.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise ExportError(f"--push-to-hub needs a Hugging Face token with write access in "
                          f"{TOKEN_VARIABLE}: nothing was written; set {TOKEN_VARIABLE} (it is "
                          "never written to the export) or export without --push-to-hub")
    return token


def push_dataset(folder: str | os.PathLike, repo: str, token: str, *, private: bool = True,
                 api: Any = None) -> Any:
    """Create the dataset repository ``repo`` (private unless ``private`` is False; an existing
    one is kept) and upload :data:`PUSHED_PATTERNS` of ``folder`` in one commit. ``api``: an
    ``HfApi``-like object (tests pass a recording one); default ``HfApi(token=token)``."""
    if api is None:
        from huggingface_hub import HfApi

        api = HfApi(token=token)
    api.create_repo(repo_id=repo, repo_type="dataset", private=private, exist_ok=True)
    result = api.upload_folder(folder_path=str(Path(folder)), repo_id=repo, repo_type="dataset",
                               allow_patterns=PUSHED_PATTERNS,
                               commit_message="vdlib export: curricula and dataset card")
    logger.info("pushed %s to the Hub dataset %s", folder, repo)
    return result
