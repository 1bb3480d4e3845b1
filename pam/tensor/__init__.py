"""The tensor back end's runtime on PAM/TGR: tensor operations and collectives as tasks on the
machine's PEs (runtime.py), the step graph it runs (graph.py), how collectives move parts
(collectives.py), the per-step statistics (stats.py) and the training job (job.py). The kernels
(kernels.py) are numpy functions with their FLOP counts."""
