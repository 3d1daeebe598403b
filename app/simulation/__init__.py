"""The world the learner does not see into: simulated prospects, the readers behind them, and what they do with an
email.

A reader sees only what a real prospect receives (subject, body text, sender) and reacts by hidden traits drawn per
market seed. Nothing here reads the agent, the loop, the backends or the outcome model's features, and only the demo's
simulated provider (`app.outcomes.simulated`, `app.outcomes.simulated_team`) and `bench/` read this package (the
import contracts in pyproject.toml), so the learner and the world share no code, word list or feature.
"""
