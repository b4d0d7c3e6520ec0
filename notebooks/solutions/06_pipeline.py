"""Reference solutions to the exercises of notebook 06 (model parallelism and pipelining)."""


def predict_bubble(stages, microbatches):
    """Each stage idles K-1 of the M+K-1 slots of the forward pass, and again backward."""
    return (stages - 1) / (microbatches + stages - 1)


def gpipe_order(stage, stages, microbatches):
    """Every forward in order, then every backward, newest micro-batch first."""
    forwards = [("F", i) for i in range(microbatches)]
    backwards = [("B", i) for i in reversed(range(microbatches))]
    return forwards + backwards
