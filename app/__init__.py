"""CoDreamer: RL learning loops for sales emails, served over HTTP."""

import os

# litellm (imported by ART) fetches a model price map from the internet at import time
# unless told to use its bundled copy; nothing here may touch the network on import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_TELEMETRY", "False")
