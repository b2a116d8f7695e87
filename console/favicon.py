"""The console's icon: a small SVG beside its stylesheet, named by every page (`<link rel="icon">`), and
answered at `/favicon.ico` too, where browsers and tools ask for it by habit (a 404 there fills access
logs and browser consoles with noise). SVG is served under that name: browsers read the media type, not
the file name."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

ICON = Path(__file__).parent / "static" / "favicon.svg"

router = APIRouter(include_in_schema=False)


@router.get("/console/static/favicon.svg", response_class=FileResponse)
@router.get("/favicon.ico", response_class=FileResponse)
def icon() -> FileResponse:
    return FileResponse(ICON, media_type="image/svg+xml", headers={"Cache-Control": "public, max-age=86400"})
