"""One Optuna study per task: asking, telling and settling trials, samplers, seeds and names."""
