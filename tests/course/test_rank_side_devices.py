"""Every tensor a rank makes is made on the rank's device, or says on its line that it is on
the CPU on purpose (`# cpu`): a tensor made without `device=` lands on the CPU and, under
NCCL, fails at its first collective, which a CPU-only CI would never see. So the rule is
checked on the source of every module that uses torch.distributed."""

from __future__ import annotations

import ast
from pathlib import Path

import course_utils

FACTORIES = {
    "arange", "as_tensor", "empty", "empty_strided", "eye", "full", "linspace", "logspace",
    "normal", "ones", "rand", "randint", "randn", "randperm", "tensor", "zeros",
}  # fmt: skip
PACKAGE = Path(course_utils.__file__).parent


def factories_without_device(source: str, name: str = "<source>") -> list[str]:
    """`torch.<factory>(...)` calls with no `device=` and no `# cpu` on their lines, in a
    module that uses torch.distributed (one that does not never runs a collective)."""
    if "torch.distributed" not in source and "from torch import distributed" not in source:
        return []
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        if node.func.attr not in FACTORIES or not (
            isinstance(owner, ast.Name) and owner.id == "torch"
        ):
            continue
        if any(k.arg == "device" for k in node.keywords):
            continue
        if any("# cpu" in line for line in lines[node.lineno - 1 : node.end_lineno]):
            continue
        found.append(f"{name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def test_every_rank_side_tensor_names_its_device():
    found = [
        site
        for path in sorted(PACKAGE.rglob("*.py"))
        for site in factories_without_device(path.read_text(), str(path.relative_to(PACKAGE)))
    ]
    assert not found, (
        "tensors made without device= (add device=device() or '# cpu'):\n" + "\n".join(found)
    )


PLANTED = """
import torch
import torch.distributed as dist

def rank_fn(n):
    t = torch.zeros(n)
    dist.all_reduce(t)
    return t
"""


def test_a_planted_cpu_tensor_in_a_rank_function_is_caught():
    assert factories_without_device(PLANTED) == ["<source>:6: t = torch.zeros(n)"]


def test_device_or_a_cpu_mark_or_no_collectives_pass():
    assert not factories_without_device(PLANTED.replace("zeros(n)", "zeros(n, device=dev)"))
    assert not factories_without_device(PLANTED.replace("zeros(n)", "zeros(n)  # cpu"))
    assert not factories_without_device(PLANTED.replace("import torch.distributed as dist", ""))
    spanning = PLANTED.replace("torch.zeros(n)", "torch.zeros(\n        n,  # cpu\n    )")
    assert not factories_without_device(spanning)
