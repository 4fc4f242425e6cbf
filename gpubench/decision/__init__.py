"""What the measurements mean for the user: time estimates, projection to other cards, cost, memory budget,
advice and the local-vs-cloud recommendation. Reads typed results; never touches the device."""
