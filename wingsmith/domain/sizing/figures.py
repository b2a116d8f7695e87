"""A number that carries its own working: the value, its unit, the formula and the inputs the
formula was fed, so a reviewer can redo the arithmetic without reading the code."""

from __future__ import annotations

from pydantic import BaseModel, Field

Input = int | float | str | bool | None


class Figure(BaseModel, frozen=True):
    value: int | float
    unit: str
    formula: str
    inputs: dict[str, Input] = Field(default_factory=dict)


def figure(value: int | float, unit: str, formula: str, **inputs: Input) -> Figure:
    return Figure(value=value, unit=unit, formula=formula, inputs=inputs)


class SizingError(ValueError):
    """A config or a request the sizing cannot work with; the message names what is wrong."""
