"""The review console's pages (they live in console; this module only puts them on the map)."""

from console import router

__all__ = ["router"]
