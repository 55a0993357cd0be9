"""CUDA plumbing shared by the trainer and the inference runtime: kernel sources and the CuPy device.

Neither `litenet.train` nor `litenet.runtime` owns it, so the runtime can launch kernels without
importing the trainer (a Raspberry Pi installs the runtime alone and never imports this package).
"""
