"""Deployment: fp32 and int8 (QDQ) ONNX, int8 calibration, LiteNet's int8 plan and TensorRT engines.

Entry points: `litenet export` (cli.py) and `export_model` (pipeline.py). The report that compares
with ONNX Runtime's own quantizer (peer.py) and times both is a benchmark: bench/export_report.py.
"""
