"""String enums whose `value` is read without running Python code.

pydantic reads `.value` of each enum member it serializes. On Python 3.11 `value` is an
`enum.property`, whose `__get__` is Python: a worker's turn serializes steps, events and its
checkpoint, and those reads were about 3% of its CPU. A plain property over the member's
`_value_` (`operator.attrgetter`, C all the way) answers the same.
"""

from __future__ import annotations

import operator
from enum import Enum

__all__ = ["ValueEnum"]


class ValueEnum(str, Enum):
    """A `str` enum, as the models use them, with the fast `value`."""


# set after the class is made: written in its body, the enum machinery would take it for a
# member's definition in type checkers' eyes
setattr(ValueEnum, "value", property(operator.attrgetter("_value_")))  # noqa: B010
