"""An immutable vector of resource amounts keyed by Kubernetes resource name."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from topoq.domain.errors import InvalidInputError
from topoq.domain.quantity import format_quantity, parse_quantity


class Resources(Mapping[str, int]):
    """Amounts in canonical units (see :mod:`topoq.domain.quantity`); zero entries are dropped."""

    __slots__ = ("_amounts",)

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        self._amounts: dict[str, int] = {
            name: int(value) for name, value in sorted((amounts or {}).items()) if value != 0
        }

    @classmethod
    def parse(cls, quantities: Mapping[str, object] | None, *, where: str = "") -> Resources:
        """Parse ``{"cpu": "500m", "memory": "16Gi", ...}``; an error names ``where.<resource>``."""
        parsed: dict[str, int] = {}
        for name, text in (quantities or {}).items():
            field = f"{where}.{name}" if where else str(name)
            if not isinstance(text, str | int | float):
                raise InvalidInputError(
                    f"expected a quantity, got {text!r}",
                    where=field,
                    hint="give a quantity such as 8, '500m' or '16Gi'",
                )
            try:
                parsed[str(name)] = parse_quantity(str(name), text)
            except InvalidInputError as error:
                raise error.located(field) from None
        return cls(parsed)

    def __getitem__(self, name: str) -> int:
        return self._amounts[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._amounts)

    def __len__(self) -> int:
        return len(self._amounts)

    def __hash__(self) -> int:
        return hash(tuple(self._amounts.items()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._amounts == other._amounts
        return NotImplemented

    def __repr__(self) -> str:
        return f"Resources({self.formatted()})"

    def amount(self, name: str) -> int:
        return self._amounts.get(name, 0)

    def __add__(self, other: Resources) -> Resources:
        names = set(self) | set(other)
        return Resources({name: self.amount(name) + other.amount(name) for name in names})

    def __sub__(self, other: Resources) -> Resources:
        names = set(self) | set(other)
        return Resources({name: self.amount(name) - other.amount(name) for name in names})

    def scaled(self, factor: int) -> Resources:
        return Resources({name: value * factor for name, value in self._amounts.items()})

    def fits_in(self, capacity: Mapping[str, int]) -> bool:
        return all(value <= capacity.get(name, 0) for name, value in self._amounts.items())

    def formatted(self) -> dict[str, str]:
        return {name: format_quantity(name, value) for name, value in self._amounts.items()}
