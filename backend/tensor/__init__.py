"""The tensor-graph back end: GPT training as a graph of tensor operations run on the PAM/TGR
scheduler (docs/tensor.md): the model builder (gpt.py), the configuration (config.py), the
data (data.py) and the trainer (train.py)."""
