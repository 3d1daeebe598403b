"""`python -m app …` is the `codreamer` command."""

from app.cli import main

main()
