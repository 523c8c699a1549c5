"""An immutable vector of resource amounts keyed by Kubernetes resource name."""

from __future__ import annotations

import re
from collections.abc import (
    Collection,
    ItemsView,
    Iterable,
    Iterator,
    KeysView,
    Mapping,
    Sequence,
    ValuesView,
)

from topoq.domain.errors import InvalidInputError
from topoq.domain.quantity import format_quantity, parse_quantity

MAX_RESOURCE_NAMES = 64
"""Resources one mapping names (a node reports a dozen or so)."""
_NAME = r"[A-Za-z0-9](?:[-_.A-Za-z0-9]*[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*"
_RESOURCE_NAME = re.compile(rf"(?:{_PREFIX}/)?{_NAME}")
_RESOURCE_NAME_RULE = (
    "a Kubernetes resource name: an optional DNS prefix and '/', then 1 to 63 letters, digits, "
    "'-', '_' and '.', e.g. cpu, memory, nvidia.com/gpu"
)


def _check_resource_name(name: object, field: str) -> None:
    prefix, _, short = name.rpartition("/") if isinstance(name, str) else ("", "", "")
    if (
        isinstance(name, str)
        and len(short) <= 63
        and len(prefix) <= 253
        and _RESOURCE_NAME.fullmatch(name) is not None
    ):
        return
    raise InvalidInputError(
        f"{name!r:.80} is not a valid resource name", where=field, hint=_RESOURCE_NAME_RULE
    )


class Resources(Mapping[str, int]):
    """Amounts in canonical units (see :mod:`topoq.domain.quantity`); zero entries are dropped."""

    __slots__ = ("_amounts", "_hash")

    def __init__(self, amounts: Mapping[str, int] | None = None) -> None:
        self._amounts: dict[str, int] = {
            name: int(value) for name, value in sorted((amounts or {}).items()) if value != 0
        }

    @classmethod
    def _canonical(cls, amounts: dict[str, int]) -> Resources:
        """From whole amounts already computed here (no conversion): zeros dropped, names in
        order, as ``__init__`` keeps them. The cycle's quota arithmetic makes millions."""
        made = cls.__new__(cls)
        made._amounts = {name: amounts[name] for name in sorted(amounts) if amounts[name] != 0}
        return made

    @classmethod
    def of_amounts(cls, names: Sequence[str], amounts: Iterable[int]) -> Resources:
        """From whole amounts given in the order of ``names``, which must be sorted: how the
        quota books' fixed-order amounts (``core.quota_terms``) become ``Resources`` again,
        with no conversion and no sorting."""
        made = cls.__new__(cls)
        made._amounts = {name: value for name, value in zip(names, amounts, strict=True) if value}
        return made

    def restricted_to(self, names: Collection[str]) -> Resources:
        """Only the amounts of ``names`` (itself when it names no other)."""
        kept = {name: value for name, value in self._amounts.items() if name in names}
        if len(kept) == len(self._amounts):
            return self
        made = Resources.__new__(Resources)
        made._amounts = kept
        return made

    @classmethod
    def parse(cls, quantities: Mapping[str, object] | None, *, where: str = "") -> Resources:
        """Parse ``{"cpu": "500m", "memory": "16Gi", ...}``; an error names ``where.<resource>``."""
        parsed: dict[str, int] = {}
        if len(quantities or {}) > MAX_RESOURCE_NAMES:
            raise InvalidInputError(
                f"more than {MAX_RESOURCE_NAMES} resources",
                where=where or None,
                hint=f"name at most {MAX_RESOURCE_NAMES} resources (cpu, memory, …)",
            )
        for name, text in (quantities or {}).items():
            field = f"{where}.{name}" if where else str(name)
            _check_resource_name(name, field)
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

    def __reduce__(self) -> tuple[type[Resources], tuple[dict[str, int]]]:
        """Pickled by its amounts alone: a string's hash differs between processes, so the
        cached hash must not travel."""
        return (Resources, (self._amounts,))

    def __hash__(self) -> int:
        """Worked out once (the value never changes): amounts key the cycle's shared answers."""
        try:
            return self._hash
        except AttributeError:
            self._hash: int = hash(tuple(self._amounts.items()))
            return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Resources):
            return self._amounts == other._amounts
        return NotImplemented

    def __repr__(self) -> str:
        return f"Resources({self.formatted()})"

    def items(self) -> ItemsView[str, int]:
        return self._amounts.items()

    def keys(self) -> KeysView[str]:
        return self._amounts.keys()

    def values(self) -> ValuesView[int]:
        return self._amounts.values()

    def amount(self, name: str) -> int:
        return self._amounts.get(name, 0)

    def __add__(self, other: Resources) -> Resources:
        if not other:
            return self
        if not self._amounts:
            return other if isinstance(other, Resources) else Resources(other)
        merged = dict(self._amounts)
        for name, value in other.items():
            merged[name] = merged.get(name, 0) + int(value)
        return Resources._canonical(merged)

    def __sub__(self, other: Resources) -> Resources:
        if not other:
            return self
        merged = dict(self._amounts)
        for name, value in other.items():
            merged[name] = merged.get(name, 0) - int(value)
        return Resources._canonical(merged)

    def scaled(self, factor: int) -> Resources:
        return Resources({name: value * factor for name, value in self._amounts.items()})

    def fits_in(self, capacity: Mapping[str, int]) -> bool:
        return all(value <= capacity.get(name, 0) for name, value in self._amounts.items())

    def formatted(self) -> dict[str, str]:
        return {name: format_quantity(name, value) for name, value in self._amounts.items()}
