"""The learning loop: generate → score → GRPO train → KG reweight → email, as plain async steps."""
