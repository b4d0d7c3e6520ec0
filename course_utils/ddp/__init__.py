"""Chapter 4 (`04_data_parallel_ddp.ipynb`): data parallelism with DistributedDataParallel.

`equivalence`: N ranks with batch b make exactly the update of one process with batch N*b,
by hand and with DDP. `experiments`: the report's runs (DistributedSampler, effective
batch, lr scaling). `cost`: where a DDP step's time goes and what cuts the communication.
`torchrun_train`: the same training as a script for torchrun on several nodes.
"""
