"""``evs web``: a small local web UI over a store (the ``[web]`` extra: Starlette, uvicorn,
Jinja2).

``create_app`` builds the ASGI application; importing this package needs the extra, and
``runtime.cli``'s ``evs web`` says which extra to install when it is missing.
"""

from __future__ import annotations

from ._app import WebConfig, create_app

__all__ = ["WebConfig", "create_app"]
