"""Reference solutions to the exercises of notebook 06 (model parallelism and pipelining)."""


def predict_bubble(stages, microbatches):
    """Each stage idles K-1 of the M+K-1 slots of the forward pass, and again backward."""
    return (stages - 1) / (microbatches + stages - 1)


def gpipe_order(stage, stages, microbatches):
    """Every forward in order, then every backward, newest micro-batch first."""
    forwards = [("F", i) for i in range(microbatches)]
    backwards = [("B", i) for i in reversed(range(microbatches))]
    return forwards + backwards


def interleaved_order(rank, stages, microbatches, chunks):
    """Forwards in rounds of K micro-batches, a round through each chunk in turn; backwards the
    same way with the chunks reversed. The warm-up is (v-1) rounds, plus 2 forwards per rank
    after this one (the time the first gradient takes to come back), then 1F1B."""
    per_round = microbatches // max(1, microbatches // stages)  # K when K divides M
    total = chunks * microbatches
    warmup = min((chunks - 1) * per_round + 2 * (stages - 1 - rank), total)
    done = {"F": [0] * chunks, "B": [0] * chunks}  # micro-batches each chunk has run
    ops = []

    def run(kind, n):  # the n-th op of this kind: its round decides the chunk
        step = (n // per_round) % chunks
        chunk = step if kind == "F" else chunks - 1 - step
        ops.append((kind, done[kind][chunk], chunk))
        done[kind][chunk] += 1

    for n in range(warmup):
        run("F", n)
    for n in range(total - warmup):
        run("F", warmup + n)
        run("B", n)
    for n in range(total - warmup, total):
        run("B", n)
    return ops


def split_backward(order):
    """Each W right after its B, and the optimizer step once every W is done."""
    ops = []
    for kind, i in order:
        ops.append((kind, i))
        if kind == "B":
            ops.append(("W", i))
    return [*ops, ("step",)]
