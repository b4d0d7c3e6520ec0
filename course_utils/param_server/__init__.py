"""Chapter 7 (`07_async_sgd_parameter_server.ipynb`): parameter servers and asynchronous SGD.

A synchronous and an asynchronous (Downpour) parameter server on real ranks (`server`,
`runs`), stale gradients, a worker that dies, and local SGD with periodic averaging
(`local_sgd`).
"""
