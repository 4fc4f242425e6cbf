"""The vectorised trading environment the RL workloads (dqn, ppo) train in: its config and its step."""
