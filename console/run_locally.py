""""Run the control plane locally": the README's first section, served by the plane itself so the link
works offline and always matches the code it runs beside."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request

from api.errors import ApiError
from console.rendering import ConsoleRoute, render

router = APIRouter(route_class=ConsoleRoute)

README = Path(__file__).resolve().parents[1] / "README.md"
SECTION = "## Two commands"


def readme_section(text: str, heading: str = SECTION) -> str:
    """The lines from `heading` to the next heading of the same level."""
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return "\n".join(lines[start:end]).strip()


@router.get("/run-locally")
def run_locally(request: Request):
    try:
        section = readme_section(README.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise ApiError(404, "This plane was installed without its README; see the project's repository.") from None
    return render(request, "run_locally.html", section=section)
