"""Every durable workflow and the queue it runs on: the list a worker registers and launches with, and the names the
API enqueues by. Only names live here: a worker imports each workflow's module, the API never does.

DBOS recovers and dequeues only the workflows of its own application version, one per process: it is made of every
workflow's version, so a change to any workflow's steps is a new version. A run in flight across such an upgrade is
ended `failed` (resumable) by the housekeeping, as a checkpoint of the old steps cannot be replayed."""

from app.kit.durable import Queue, Workflow

RUNS = Queue("runs")
DRAFTS = Queue("drafts")  # a batch's own workflow, and evaluations, which draft as batches do
# A batch enqueues each chunk of its prospects here, so every worker drafts a share of one batch; two queues, so that
# batches waiting for their chunks can never hold every slot the chunks need.
DRAFT_CHUNKS = Queue("draft_chunks")
QUEUES = (RUNS, DRAFTS, DRAFT_CHUNKS)

LEARNING_RUN = Workflow("learning_run", RUNS, "app.runs.workflow", version=4)
DRAFT_BATCH = Workflow("draft_batch", DRAFTS, "app.drafts.workflow", version=1)
DRAFT_CHUNK = Workflow("draft_batch_chunk", DRAFT_CHUNKS, "app.drafts.workflow", version=1)
EVALUATION = Workflow("evaluation", DRAFTS, "app.evaluations.workflow", version=1)
WORKFLOWS = (LEARNING_RUN, DRAFT_BATCH, DRAFT_CHUNK, EVALUATION)

APPLICATION_VERSION = "+".join(f"{workflow.name}-{workflow.version}" for workflow in WORKFLOWS)
