"""The measured run: its phases, each model's rounds, the what-ifs, data-parallel ranks and validate's replays."""
