"""``dmh serve``: a search page and a JSON API over a collection (:mod:`dmh.app.collection`).

Built on Starlette (the ASGI toolkit under FastAPI) and uvicorn: optional dependencies,
``pip install "dmh[serve]"``. The page is plain HTML/CSS/JS shipped in ``dmh/app/server/static``
(no CDN, nothing fetched from elsewhere). See :mod:`dmh.app.server.app` for the API.
"""

from __future__ import annotations

import importlib.util

from ...featurize import MissingExtraError

_missing = [m for m in ("starlette", "uvicorn", "multipart") if importlib.util.find_spec(m) is None]
if _missing:
    raise MissingExtraError(
        f"dmh serve needs the optional module(s) {', '.join(_missing)}: "
        'pip install "dmh[serve]"  (or: pip install starlette uvicorn python-multipart)'
    )

from .app import BackgroundServer, Limits, create_app, run  # noqa: E402

__all__ = ["BackgroundServer", "Limits", "create_app", "run"]
