"""Reference solutions to the exercises of notebook 07 (parameter servers and async SGD)."""


def server_bytes(workers, numel, itemsize):
    """Each worker's gradient comes in and the new parameters go back out to each worker."""
    return 2 * workers * numel * itemsize


def staleness(events):
    """Keep the server's version; a push is as stale as the updates since its worker's pull."""
    version, pulled, out = 0, {}, []
    for kind, worker in events:
        if kind == "pull":
            pulled[worker] = version
        else:
            out.append(version - pulled[worker])
            version += 1
    return out
