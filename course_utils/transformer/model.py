"""The small causal transformer notebook 10 splits, its data, and its one-process twin.

GPT-2's shape at toy size: token and learned position embeddings, pre-LayerNorm blocks of
causal multi-head attention and a GELU MLP, a final LayerNorm and an LM head. Every
parallel version of the chapter is built from this model's weights and trained on the
same batches, so each is compared with `one_process_steps` number for number.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..core.sizes_model_parallel import TransformerSizes


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal softmax attention on (batch, heads, seq, head_dim): the math every split of
    the sequence (ring attention) must reproduce."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


class Attention(nn.Module):
    """Multi-head causal self-attention with separate q, k, v projections.

    The head count is read from the projections' output (`-1` below), so a copy whose
    projections hold only some heads (tensor parallel) runs this same forward.
    """

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.head_dim = width // heads
        self.q, self.k, self.v = (nn.Linear(width, width) for _ in range(3))
        self.out = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q, k, v = (
            p(x).view(b, s, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v)
        )
        return self.out(attention(q, k, v).transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    """x + attn(ln1(x)), then + mlp(ln2(x)); `mlp` may be swapped (a mixture of experts).

    No dropout: with p > 0 a split model would need the one-process model's random masks,
    slice by slice, to be compared with it; the regions where it would act are the
    LayerNorms' (sequence parallel shards both alike)."""

    def __init__(self, width: int, heads: int, hidden: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = Attention(width, heads)
        self.mlp = MLP(width, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Embedding(nn.Module):
    def __init__(self, vocab: int, width: int, seq_len: int):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(seq_len, width)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        where = torch.arange(tokens.shape[1], device=tokens.device)
        return self.tokens(tokens) + self.positions(where)


class Transformer(nn.Module):
    """Tokens (batch, seq) to logits (batch, seq, vocab).

    `split_sequence` and `join_sequence` do nothing here; sequence parallel replaces them
    with the cut after the embedding and the join before the head, so every parameter
    keeps its name in every version of the model."""

    def __init__(self, sizes: TransformerSizes):
        super().__init__()
        w = sizes.width
        self.embed = Embedding(sizes.vocab, w, sizes.seq_len)
        self.split_sequence = nn.Identity()
        self.blocks = nn.ModuleList(
            Block(w, sizes.heads, sizes.mlp_ratio * w) for _ in range(sizes.blocks)
        )
        self.norm = nn.LayerNorm(w)
        self.join_sequence = nn.Identity()
        self.head = nn.Linear(w, sizes.vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Tokens in, logits out. A pipeline stage (notebook 11) without the embedding takes
        the previous stage's activations, and one without the head returns its own."""
        if self.embed is not None:
            x = self.split_sequence(self.embed(x))
        for block in self.blocks:
            x = block(x)
        return x if self.head is None else self.head(self.join_sequence(self.norm(x)))


def build(sizes: TransformerSizes, seed: int = 0, device=None) -> Transformer:
    """The model with weights drawn on the CPU from `seed`, so every rank builds the same."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Transformer(sizes)
    return model.to(device or "cpu")


def batches(sizes: TransformerSizes, steps: int, seed: int = 1) -> torch.Tensor:
    """(steps, batch, seq_len + 1) token ids: arithmetic sequences mod `vocab`.

    Each sequence starts at a random token and steps by a random stride, so after two
    tokens the rest is predictable: a pattern a small model can learn, though the few
    steps of a comparison only move its loss a little."""
    gen = torch.Generator().manual_seed(seed)  # cpu: the same data on every rank
    shape = (steps, sizes.batch, 1)
    start = torch.randint(0, sizes.vocab, shape, generator=gen)  # cpu
    stride = torch.randint(1, 8, shape, generator=gen)  # cpu
    return (start + stride * torch.arange(sizes.seq_len + 1)) % sizes.vocab  # cpu


def loss_of(model: nn.Module, sequence: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy of one batch of (batch, seq_len + 1) tokens."""
    logits = model(sequence[:, :-1])
    return F.cross_entropy(logits.flatten(0, 1), sequence[:, 1:].flatten())


def train_steps(model: nn.Module, data: torch.Tensor, lr: float, after_backward=None) -> list:
    """Plain SGD over `data`'s batches; the losses.

    SGD rather than Adam: Adam divides each step by the gradient's own size, so fp32
    rounding in a near-zero gradient becomes a visible difference between two models
    that agree to 1e-7. `after_backward(model)` runs between backward and step (the
    gradient sync sequence parallel needs)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    device = next(model.parameters()).device
    losses = []
    for sequence in data:
        opt.zero_grad()
        loss = loss_of(model, sequence.to(device))
        loss.backward()
        if after_backward is not None:
            after_backward(model)
        opt.step()
        losses.append(loss.item())
    return losses


def one_process_steps(sizes: TransformerSizes, steps: int | None = None, seed: int = 0) -> dict:
    """The reference every split model is compared with: `steps` SGD steps in fp32 on one
    process. Returns {"params": name -> tensor (CPU), "losses": [float, ...]}."""
    steps = sizes.steps if steps is None else steps
    model = build(sizes, seed)
    losses = train_steps(model, batches(sizes, steps), sizes.lr)
    return {"params": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "losses": losses}  # fmt: skip
