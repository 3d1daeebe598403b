"""Real outcomes of the emails a run wrote (opens, clicks, replies), from the caller or an email provider."""
