"""One readable file per workload: mlp, dqn, ppo, mamba2, tft (and the trading environment for RL)."""
