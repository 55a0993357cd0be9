"""See inside training: gradient and residual-path monitors, saliency maps, evaluation, traces, diagnostics."""
