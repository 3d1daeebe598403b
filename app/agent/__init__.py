"""The agent's wire protocol: its tools, its prompt, the email it sends, and how a transcript reads back.

Both sides of the conversation import it: the loop (which runs rollouts against any model) and the
embedded backend (whose policy and judge read the same messages).
"""
