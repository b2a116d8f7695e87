"""The review console's pages (they live in api/console; this module only puts them on the map)."""

from api.console import router

__all__ = ["router"]
