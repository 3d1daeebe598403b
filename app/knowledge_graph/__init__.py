"""Knowledge graphs of company facts: documents, validation and the in-memory graph the agent explores."""
