"""How often things happen to cold email, as published benchmarks report them (docs/architecture/learning.md, "The
world", names the sources). A reader's log-odds of a reply start from these base rates and move with what it reads."""

from pydantic import BaseModel, ConfigDict, Field


class WorldRates(BaseModel):
    """The world's base rates and delays. The defaults give a good email (its reader's main pain answered with a
    detail that persuades them, the ask they answer, a length they tolerate) a positive reply a few per cent of the
    time and a generic one well under one per cent."""

    model_config = ConfigDict(frozen=True)

    positive_base_logit: float = Field(-5.8, description=(
        "log-odds of a positive reply (interested or meeting) of an email that says nothing to its reader: 0.3 %"))
    relevance_gain: float = Field(2.4, description="log-odds per unit of relevance (the weight of the pains answered)")
    question_share: float = Field(0.4, description="questions per positive reply: neutral replies that ask for more")
    meeting_share: float = Field(0.35, description="of positive replies, those that propose a meeting outright")
    negative_base_logit: float = Field(-4.4, description=(
        "log-odds of a negative reply (not interested, unsubscribe) to an email that neither helps nor annoys: 1.2 %"))
    unsubscribe_share: float = Field(0.4, description="of negative replies, those that ask to be removed")
    misdirected_rate: float = Field(0.006, description=(
        "wrong person or a referral to a colleague, per delivered email (more where the email misses the role)"))
    out_of_office_rate: float = Field(0.035, description="auto-replies saying the reader is away, per delivered email")
    hard_bounce: tuple[float, float] = Field((0.01, 0.03), description=(
        "each market's hard-bounce rate is drawn uniformly in this range (a verified list bounces 1–3 %)"))
    human_open_logit: float = Field(-1.0, description="log-odds a reader opens a plain subject (27 %)")
    machine_open_share: float = Field(0.4, description=(
        "recipients behind a privacy proxy (Apple Mail Privacy Protection) that fetches every image on delivery"))
    open_delay_median_h: float = Field(3.0, gt=0, description="median hours from delivery to a human open")
    reply_delay_median_h: float = Field(16.0, gt=0, description="median hours from delivery to a reply")
    delay_sigma: float = Field(1.1, gt=0, description="the delays' lognormal shape: a heavy tail of late readers")
    max_delay_days: float = Field(10.0, gt=0, description="no reaction comes later than this")
