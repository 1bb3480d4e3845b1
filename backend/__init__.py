"""The tensor-graph back end: GPT training steps as HPGREM graphs, parallel layouts, and the planner.

Sub-packages are imported on demand; importing ``backend`` alone loads nothing else.
"""
