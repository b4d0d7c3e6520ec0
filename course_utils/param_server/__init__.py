"""Chapter 7 (`07_async_sgd_parameter_server.ipynb`): parameter servers and asynchronous SGD.

A synchronous and an asynchronous (Downpour) parameter server on real ranks (`server`,
`runs`), stale gradients, a worker that dies, and local SGD with periodic averaging
(`local_sgd`); a synchronous server's time against workers and shards over the emulated
link, beside its alpha-beta prediction (`scaling`); the learning rate chosen on a
validation split over several seeds, and epochs to a target loss (`tuning`); the
notebook's claims as verdicts (`verdicts`).
"""

from . import charts, exercises, scaling, tuning, verdicts
from .charts import (
    averaging_accuracy,
    loss_by_epochs,
    lr_sensitivity,
    ps_loss_curves,
    ps_traffic,
    staleness_histogram,
    updates_by_worker,
)
from .exercises import check_server_bytes, check_staleness
from .local_sgd import AveragingConfig, local_sgd_runs
from .runs import (
    allreduce_training,
    evaluate,
    run_parameter_server,
    serial_twin,
    server_config,
    traffic,
)
from .server import WorkerLost
