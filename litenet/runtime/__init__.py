"""LiteNet's inference runtime: `litenet-infer`, its backends (TensorRT, CUDA, ONNX Runtime) and image loading.

Imports only NumPy, Pillow and ONNX Runtime (and CuPy/TensorRT inside their backends): a Raspberry
Pi installs this alone, never the trainer (`litenet.train`) or the exporter (`litenet.export`).
"""
