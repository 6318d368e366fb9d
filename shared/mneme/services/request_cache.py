"""`per_request`: a service method run inside the scope tree's request cache (`ScopeService.request_cache`).

Apart from `scopes` so that the decorated method's calls into the scope tree are not calls back into a
module already on the stack (the wrapper's frame), as `bench/structure.py` counts them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from mneme.services.scopes import ScopeService

P = ParamSpec("P")
R = TypeVar("R")


def per_request(method: Callable[P, R]) -> Callable[P, R]:
    """Run `method` inside `ScopeService.request_cache()` (a no-op when one is already open)."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with ScopeService.request_cache():
            return method(*args, **kwargs)

    return wrapper
