"""Which part of a model sent a message, and whether in its forward or its backward pass.

The course's algorithms call `torch.distributed` and nothing else, so they cannot say which
layer a message belongs to. The chapter says it from outside: `label_modules` hooks each
named module so that every message the recorder writes while the module runs forward, or
while autograd runs its backward, carries the module's name and the direction; `labelled`
names a stretch of code that is not a module's (a gradient all-reduce after the backward).
The innermost label wins: a message of block 0's MLP is the MLP's, not the block's.
"""

from __future__ import annotations

import contextlib

from torch import nn

_stack: list[tuple[str, str]] = []  # (where, direction), innermost last


def current() -> tuple[str | None, str | None]:
    """The innermost (where, direction), or (None, None) outside every label."""
    return _stack[-1] if _stack else (None, None)


def _pop(label: tuple[str, str]) -> None:
    """Remove the innermost `label` (a module whose forward raised left its own above it)."""
    for i in range(len(_stack) - 1, -1, -1):
        if _stack[i] == label:
            del _stack[i:]
            return


@contextlib.contextmanager
def labelled(where: str, direction: str):
    """Messages sent in the block belong to `where`, in `direction` ("forward"/"backward")."""
    label = (where, direction)
    _stack.append(label)
    try:
        yield
    finally:
        _pop(label)


def label_modules(named: dict[str, nn.Module]) -> list:
    """Hook each module so its messages carry its name: forward while its forward runs,
    backward from the gradient of its output arriving to the gradient of its input leaving.
    The handles, to `remove()` the hooks."""
    handles = []
    for where, module in named.items():
        forward, backward = (where, "forward"), (where, "backward")
        handles += [
            module.register_forward_pre_hook(lambda *_, label=forward: _stack.append(label)),
            module.register_forward_hook(lambda *_, label=forward: _pop(label), always_call=True),
            module.register_full_backward_pre_hook(lambda *_, label=backward: _stack.append(label)),
            module.register_full_backward_hook(lambda *_, label=backward: _pop(label)),
        ]
    return handles
