"""Training attention flows: differentiable simulation, adjoints, trainable heads (issue 15)."""
