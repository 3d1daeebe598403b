"""Every durable workflow and the queue it runs on: the list a worker registers and launches with, and the names the
API enqueues by. Only names live here: a worker imports each workflow's module, the API never does.

DBOS recovers and dequeues only the workflows of its own application version, one per process: it is made of every
workflow's version, so a change to any workflow's steps is a new version. A run in flight across such an upgrade is
ended `failed` (resumable) by the housekeeping, as a checkpoint of the old steps cannot be replayed."""

from app.kit.durable import Queue, Workflow

RUNS = Queue("runs")
# A batch's own workflow, and evaluations, which draft as batches do. Partitioned by tenant: one tenant's workflows
# hold at most DRAFT_CONCURRENCY_PER_TENANT of the queue's slots, and each poll visits the tenants in a random order,
# so one tenant's backlog never holds another's batch behind it.
DRAFTS = Queue("drafts", by_tenant=True)
# A batch enqueues each chunk of its prospects here, so every worker drafts a share of one batch; two queues, so that
# batches waiting for their chunks can never hold every slot the chunks need. By tenant too, for the same reason.
DRAFT_CHUNKS = Queue("draft_chunks", by_tenant=True)
QUEUES = (RUNS, DRAFTS, DRAFT_CHUNKS)

LEARNING_RUN = Workflow("learning_run", RUNS, "app.runs.workflow", version=4)
# 2: chunks enqueued by tenant, steps retried through database trouble, a cancelled batch drafts no more
DRAFT_BATCH = Workflow("draft_batch", DRAFTS, "app.drafts.workflow", version=2)
# 3: by tenant, retried through database trouble, and suppressed prospects drafted as such
DRAFT_CHUNK = Workflow("draft_batch_chunk", DRAFT_CHUNKS, "app.drafts.workflow", version=3)
# 3: steps retried through database trouble; a cancelled evaluation is left cancelled; judged by positive replies
EVALUATION = Workflow("evaluation", DRAFTS, "app.evaluations.workflow", version=3)
WORKFLOWS = (LEARNING_RUN, DRAFT_BATCH, DRAFT_CHUNK, EVALUATION)

APPLICATION_VERSION = "+".join(f"{workflow.name}-{workflow.version}" for workflow in WORKFLOWS)
