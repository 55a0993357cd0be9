"""Data-parallel training: one process per GPU (or per CPU share), the global batch split over the
ranks, the gradients summed by a communicator (comm.py, nccl.py), started by launch.py."""
