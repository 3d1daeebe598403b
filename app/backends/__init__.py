"""Model backends: what serves the policy for rollouts and what trains it."""
