"""One pydantic-settings object for every knob; read from the environment and `.env`."""

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

BackendName = Literal["embedded", "openai", "serverless", "local", "tinker"]
DEFAULT_RETRY_SCHEDULE = [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 43200]  # ≈ 27 h in all
DATABASE_POOL_SIZE = 10  # connections a process keeps, at least
# Connections one executing run holds at once, at most: its overlapped stages (the next iteration's rollouts while this
# one trains) each hold one (20 runs on one worker held 36 at their busiest).
RUN_CONNECTIONS = 2
# Near the sales tools' interest scales (Instantly: meeting booked 2, interested 1, out of office 0, not interested -1,
# wrong person -2, lost -3): a question or a referral is a small step forward, an unsubscribe or a complaint the worst.
DEFAULT_REPLY_INTEREST = {"meeting": 2.0, "interested": 1.0, "question": 0.5, "referral": 0.5, "wrong_person": -1.0,
                          "not_interested": -1.0, "unsubscribe": -3.0, "out_of_office": 0.0, "auto_reply": 0.0,
                          "bounce": 0.0, "unknown": 0.0}
RESERVED_JUDGES = ("default", "embedded")  # a run's judge names: JUDGE_MODEL's, the embedded server's


class JudgeSpec(BaseModel):
    """One judge of `JUDGES`: a litellm model string, and where and how to reach it."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, description="A litellm model string: `openai/gpt-4.1-mini`, or `openai/<served name>` with `base_url`.")
    base_url: str | None = Field(None, description="An OpenAI-compatible endpoint of your own (vLLM, Ollama, llama.cpp); default: the provider's.")
    api_key: str | None = Field(None, description="The key sent to that endpoint.")
    context_tokens: int | None = Field(None, ge=1024, description=(
        "The judge model's context window in tokens; default: what litellm knows of the model, else unchecked."))
    max_tokens: int | None = Field(None, ge=64, description="The most tokens one answer of the judge may take; default: no limit.")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", extra="ignore")

    environment: Literal["development", "production", "test"] = Field("development", description=(
        "`production` refuses to start without API_KEYS and SECRET_KEY; `development` starts open and says so."))
    database_url: str = Field("sqlite:///./data/codreamer.sqlite", description=(
        "`postgresql://user@host:port/db` or `sqlite:///path`: the service picks the drivers (asyncpg for the API and "
        "runs, psycopg 3 for DBOS and migrations, aiosqlite for SQLite)."))
    api_keys: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Bearer keys: `tenant:key`, `tenant:sha256:<hex>` or a bare key (comma-separated).")
    secret_key: str | None = Field(
        None, min_length=16, description="Encrypts webhook secrets at rest; default (development only): a key file beside the data.")
    max_scenarios_per_run: int = Field(100, ge=1, description="Training scenarios one run may name.")
    max_rollouts_per_iteration: int = Field(1024, ge=2, description="Scenarios × rollouts_per_group of one run.")
    max_turn_rollouts: int = Field(8192, ge=2, description="max_turns × rollouts per iteration of one run.")
    max_graph_nodes: int = Field(200_000, ge=1, description="Nodes of one uploaded graph.")
    max_graph_edges: int = Field(1_000_000, ge=0, description="Edges of one uploaded graph.")
    max_graph_scenarios: int = Field(10_000, ge=1, description="Scenarios of one uploaded graph.")
    max_active_runs_per_tenant: int = Field(20, ge=1, description="Queued or running runs one tenant may have (429 above).")
    max_active_draft_batches_per_tenant: int = Field(10, ge=1, description=(
        "Queued or running draft batches one tenant may have (429 above)."))
    max_active_evaluations_per_tenant: int = Field(10, ge=1, description=(
        "Queued or running evaluations one tenant may have (429 above)."))
    message_id_domain: str = Field(
        "codreamer.invalid", pattern=r"^[A-Za-z0-9.-]{1,200}$",
        description="The domain of the Message-ID suggested for each email (use your sending domain).")
    sender_name: str | None = Field(None, min_length=1, max_length=120, description=(
        "Who signs drafted emails when neither the request nor the graph names a sender; unset: the seller's team."))
    sender_title: str | None = Field(None, min_length=1, max_length=120, description="SENDER_NAME's job title.")
    reply_window_s: float = Field(3 * 86400, gt=0, description=(
        "How long after delivery a sent email without a reply counts as not replied to (a reply counts at once)."))
    outcome_prior_sends: float = Field(20.0, gt=0, description=(
        "The outcome model's prior: each trait's weight is worth this many sends at the population's rate; more, slower to "
        "trust a trait; also the deliveries at which a sent email's own rates carry half the feedback weight."))
    reply_interest: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_REPLY_INTEREST), description=(
        "What each reply category is worth to learning, as JSON (`{\"meeting\": 2, ...}`; categories left out keep "
        "their default): above 0 a positive reply, below 0 a negative one, 0 counts for nothing. Out-of-office, "
        "auto-replies and bounces are never counted, whatever their value."))
    unsubscribe_guardrail: float = Field(0.005, ge=0, le=1, description=(
        "The most a challenger's unsubscribe-and-complaint rate per send may exceed the champion's for it to be "
        "promoted (0.005: half a percentage point), whatever its replies."))
    store_reply_text: bool = Field(False, description="Keep the text of inbound replies (default: only that one came).")
    reply_accept_recipient_domain: bool = Field(False, description=(
        "Count a reply from another address at the domain an email went to (a colleague it was forwarded to) as that "
        "recipient's one reply; by default only the address itself (or the email's plus-address) counts."))
    promotion_min_recipients: int = Field(5, ge=1, description=(
        "Distinct verified recipients whose replies to a challenger's drafts an evaluation must rest on before it "
        "promotes the challenger (automatically, or under require_evidence)."))
    max_inbound_bytes: int = Field(10 * 1_048_576, ge=1024, description=(
        "Largest inbound message (the request body of /outcomes/hooks/{id}/inbound, attachments included): 413 above it."))
    inbound_parse_timeout_s: float = Field(10.0, gt=0, description=(
        "Time one inbound message may take to parse in a parser process; past it the process is stopped and the message "
        "refused (422)."))
    inbound_parse_workers: int = Field(1, ge=1, le=16, description=(
        "Processes that parse inbound messages (never the API's event loop); a few more messages than that wait, the "
        "rest are answered 429 with Retry-After."))
    inbound_max_mime_parts: int = Field(500, ge=1, description=(
        "MIME parts (or form fields and files) one inbound message may have: 422 above it."))
    inbound_max_mime_depth: int = Field(20, ge=1, le=200, description=(
        "Levels of nested MIME parts one inbound message may have: 422 above it."))
    inbound_max_text_chars: int = Field(32_768, ge=1024, description=(
        "Characters of an inbound reply's body read for its new text (what comes after is quoted history or cut)."))
    trajectory_retention_iterations: int = Field(
        0, ge=0, description="Keep each trajectory's full conversation for the last N iterations of a run (0: all).")
    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Browser origins allowed to call the API (comma-separated); empty: CORS off.")
    model_backend: BackendName = Field("embedded", description=(
        "A run's backend when its request names none; the service refuses to start when it cannot be used."))
    judge_model: str = Field("embedded", description=(
        "The RULER judge: `embedded`, or a litellm model string (`openai/gpt-4.1-mini`, `openai/<name>` with JUDGE_BASE_URL)."))
    judge_base_url: str | None = Field(None, description="An OpenAI-compatible endpoint serving JUDGE_MODEL (vLLM, Ollama, llama.cpp).")
    judge_max_tokens: int | None = Field(None, ge=64, description=(
        "The most tokens one answer of JUDGE_MODEL may take (default: no limit): a small local model may otherwise "
        "ramble until its context is full."))
    judge_context_tokens: int | None = Field(None, ge=1024, description=(
        "JUDGE_MODEL's context window in tokens; default: what litellm knows of the model, else unchecked. A group whose "
        "judge prompt would not fit is judged in smaller groups."))
    judge_api_key: str | None = Field(None, description="The key sent to JUDGE_MODEL's endpoint.")
    judges: dict[str, JudgeSpec] = Field(default_factory=dict, description=(
        'Judges a run may name (JSON: {"name": {"model": …, "base_url": …, "api_key": …}}); '
        "`default` (the JUDGE_MODEL judge) and `embedded` are reserved."))
    openai_base_url: str | None = Field(None, description=(
        "The `openai` backend's OpenAI-compatible endpoint (vLLM, Ollama, any such server); default: OpenAI's."))
    openai_api_key: str | None = Field(None, description="The `openai` backend's key.")
    openai_model: str | None = Field(None, description="The model the `openai` backend's runs write with.")
    tinker_api_key: str | None = Field(None, description="The `tinker` backend's key.")
    art_serverless_base_url: str | None = Field(None, description="W&B Training API; default: ART's.")
    backend_retries: int = Field(3, ge=0, le=10, description="Retries of a transient backend failure, with backoff.")
    model_timeout_s: float = Field(120.0, gt=0, description="Timeout of one chat completion of the policy.")
    art_project: str = Field("codreamer", description="ART's project name (its logs go under ART_PATH/<project>).")
    art_model_name: str = Field("model", description="The prefix of each run's model name (`<prefix>-<run id>`).")
    art_base_model: str = Field("Qwen/Qwen2.5-14B-Instruct", description="The base model the `serverless`, `local` and `tinker` backends train.")
    art_path: str = Field(".art", description=(
        "Where ART writes each model's logs and checkpoints. One per database: a worker removes the folders here of "
        "runs its database does not have (those of deleted runs)."))
    wandb_api_key: str | None = Field(None, description="The `serverless` backend's key (W&B Training); with WEAVE_PROJECT, Weave tracing's.")
    weave_project: str | None = Field(None, description=(
        "With WANDB_API_KEY: trace rollouts and the loop's steps with Weave, and give each iteration a `trace_url`."))
    database_max_overflow: int = Field(20, ge=0, description="PostgreSQL: extra connections a process may open under load.")
    database_pool_timeout_s: float = Field(
        30.0, gt=0, description="PostgreSQL: how long a request waits for a free connection before it answers 503.")
    webhook_allow_private: bool = Field(False, description=(
        "Allow webhook receivers on private and loopback addresses (local development); otherwise such a `webhook_url` is a 422."))
    webhook_retry_schedule: Annotated[list[float], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_RETRY_SCHEDULE), description=(
            "Seconds between a webhook's attempts (comma-separated); after the last, the delivery is `failed`."))
    webhook_timeout_s: float = Field(10.0, gt=0, description="Deadline of one webhook attempt, the whole request and answer.")
    webhook_concurrency: int = Field(32, ge=1, description="Webhook attempts in flight at once in one worker.")
    webhook_concurrency_per_run: int = Field(
        2, ge=1, description="Attempts of one run's (or graph's, or draft batch's) webhooks in flight at once, across "
                             "all workers, so a slow receiver cannot hold up the others' webhooks.")
    max_concurrent_runs: int = Field(4, ge=1, description=(
        "Runs executing at once, across all workers; as many draft batches, and as many of their chunks."))
    draft_concurrency_per_tenant: int = Field(2, ge=1, description=(
        "Draft batches and evaluations of one tenant executing at once across all workers, and as many of its batches' "
        "chunks (at most MAX_CONCURRENT_RUNS): the rest of the slots stay free for other tenants."))
    run_worker: bool = Field(True, description=(
        "`codreamer serve` also executes runs, in a child process at a lower CPU priority; false makes it API-only."))
    worker_concurrency: int = Field(2, ge=1, description=(
        "Runs executing at once on one worker, so work spreads; as many draft batches, and as many of their chunks "
        "(25 prospects each)."))
    # After worker_concurrency, which its default reads. A pool opens its connections as they are needed and keeps this
    # many; one past it is closed on its return, so a worker whose runs used more than it kept opened and closed a
    # connection several times a second, each a new PostgreSQL backend (a third of the database's CPU with 20 runs).
    database_pool_size: int = Field(
        default_factory=lambda fields: max(DATABASE_POOL_SIZE, RUN_CONNECTIONS * fields["worker_concurrency"]), ge=1,
        description="PostgreSQL: connections each process keeps open (default: 10, or 2 per run a worker executes at "
                    "once if that is more).")
    worker_heartbeat_s: float = Field(5.0, gt=0, description="How often a worker records that it is alive.")
    worker_timeout_s: float = Field(30.0, gt=0, description="A worker silent this long is dead: live ones take over its runs.")
    executor_id: str = Field("codreamer-local", min_length=1, description="Stable id of this worker, for DBOS recovery.")
    shutdown_drain_s: float = Field(5.0, ge=0, description=(
        "On SIGTERM/Ctrl-C, seconds to let runs in flight finish; those still running are then interrupted "
        "and left to recovery (they resume when a worker with the same EXECUTOR_ID starts)."))
    rollout_concurrency: int = Field(32, ge=1, description="Rollouts in flight at once per run.")
    judge_retries: int = Field(2, ge=0, description="Extra judge attempts per group before it is dropped.")
    access_log: bool = Field(False, description="uvicorn's per-request log lines.")
    log_repeats: int = Field(10, ge=0, description=(
        "Log lines of one kind (same logger, level, line of code and exception class) printed per "
        "LOG_REPEAT_PERIOD_S; the rest are counted, and the next line printed says how many (0: no limit)."))
    log_repeat_period_s: float = Field(60.0, gt=0, description="The period of LOG_REPEATS.")
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Largest request body, except graph uploads.")
    max_drafts_bytes: int = Field(16 * 1_048_576, ge=1024, description=(
        "Largest POST /drafts body, JSON or a form with its CSV file: 1,000 prospects with every documented field at "
        "its longest, in Latin text, fit (custom fields count against it too)."))
    max_header_bytes: int = Field(65_536, ge=1024, description="Largest request head (request line and headers): 431 above it.")
    header_timeout_s: float = Field(10.0, gt=0, description=(
        "A request head must arrive within this many seconds of the connection opening or of the previous "
        "response; an idle or half-sent connection is closed then."))
    max_graph_bytes: int = Field(20 * 1_048_576, ge=1024, description="Largest graph document upload.")
    body_timeout_s: float = Field(30.0, gt=0, description=(
        "A request body must arrive within this many seconds of its head, plus one second per MIN_BODY_RATE bytes "
        "received; a slower one is answered 408 and its connection closed."))
    min_body_rate: int = Field(16_384, ge=0, description=(
        "Bytes per second a request body may keep arriving at beyond BODY_TIMEOUT_S without being cut off "
        "(0: none, BODY_TIMEOUT_S bounds every body)."))
    max_connections: int | None = Field(None, ge=1, description=(
        "Open HTTP connections at once; above it a new one closes the oldest connection still sending its request "
        "(or idle), or is answered 503 if every one has a request in progress. Default: the open-file limit less 128."))
    close_linger_s: float = Field(2.0, ge=0, description=(
        "After an answer sent before the request body had all arrived (a 401, a 413), the connection closes; the rest "
        "of the body is discarded for at most this long first, so that the client can read the answer."))

    @field_validator("api_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: object) -> object:
        if isinstance(value, str):
            return [key.strip() for key in value.split(",") if key.strip()]
        return value

    @field_validator("secret_key", mode="before")
    @classmethod
    def _empty_key_is_unset(cls, value: object) -> object:
        # `SECRET_KEY=` as .env.example ships it means "not set yet", not a 0-character key
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("reply_interest")
    @classmethod
    def _known_categories(cls, value: dict[str, float]) -> dict[str, float]:
        unknown = sorted(set(value) - set(DEFAULT_REPLY_INTEREST))
        if unknown:
            raise ValueError(f"unknown reply categories {', '.join(unknown)}; the categories are "
                             f"{', '.join(DEFAULT_REPLY_INTEREST)}")
        return DEFAULT_REPLY_INTEREST | value

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [origin.strip() for origin in value.split(",") if origin.strip()]
        return value

    @field_validator("cors_origins")
    @classmethod
    def _valid_origins(cls, value: list[str]) -> list[str]:
        origins = []
        for origin in value:
            origin = origin.rstrip("/")  # a browser's Origin never ends with a slash
            scheme, sep, host = origin.partition("://")
            if origin != "*" and (scheme not in ("http", "https") or not sep or not host or "/" in host):
                raise ValueError(f"CORS_ORIGINS: {origin!r} is not an origin like https://app.example.com or http://localhost:3000 (or *)")
            origins.append(origin)
        return origins

    @field_validator("webhook_retry_schedule", mode="before")
    @classmethod
    def _split_schedule(cls, value: object) -> object:
        if isinstance(value, str):
            return [float(part) for part in value.split(",") if part.strip()]
        return value

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _positive_schedule(cls, value: list[float]) -> list[float]:
        if not value or any(v < 0 for v in value):
            raise ValueError("WEBHOOK_RETRY_SCHEDULE needs one or more non-negative numbers of seconds")
        return value

    @field_validator("judges")
    @classmethod
    def _unreserved_judges(cls, value: dict[str, JudgeSpec]) -> dict[str, JudgeSpec]:
        for name in value:
            if name in RESERVED_JUDGES or not name.strip():
                raise ValueError(f"JUDGES: {name!r} is a reserved or empty name; reserved: {', '.join(RESERVED_JUDGES)}")
        return value

    def judge_names(self) -> list[str]:
        """Every judge a run may name: `default`, `embedded`, then the configured ones."""
        return [*RESERVED_JUDGES, *self.judges]

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        if not value.startswith(("sqlite://", "postgresql://", "postgres://", "postgresql+")):
            raise ValueError("DATABASE_URL must be a postgresql://… or sqlite:///… URL")
        return value

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def sqlite_path(self) -> Path:
        return Path(self.database_url.split("sqlite:///", 1)[1])


@lru_cache
def get_settings() -> Settings:
    return Settings()
