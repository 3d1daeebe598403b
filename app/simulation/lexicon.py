"""The world's own vocabulary: how a simulated reader recognises an industry, a topic, a tool, an ask, a hollow claim.

Written for the world alone; the judge, the composer and the outcome model have word lists of their own, and none of
them is read here (or this one there). Words are written plainly and reduced by `reading.stem` when read.
"""

# Words by which a reader knows that a sentence is about an industry (its own, or another's).
INDUSTRY_WORDS: dict[str, tuple[str, ...]] = {
    "healthcare": ("healthcare", "health", "hospital", "clinic", "clinical", "patient", "physician", "hipaa", "phi",
                   "ehr", "medical", "nurse"),
    "banking": ("bank", "banking", "lender", "loan", "deposit", "mortgage", "sox", "teller", "fdic"),
    "retail": ("retail", "retailer", "store", "shopper", "inventory", "merchandise", "ecommerce", "checkout", "sku"),
    "saas": ("saas", "subscription", "multi-tenant", "software company", "b2b software", "arr"),
    "manufacturing": ("manufacturing", "manufacturer", "plant", "factory", "shop floor", "production line", "oee",
                      "assembly"),
    "logistics": ("logistics", "freight", "shipment", "carrier", "fleet", "trucking", "haulage", "shipper"),
    "insurance": ("insurance", "insurer", "claim", "policyholder", "underwriting", "actuarial", "broker"),
    "fintech": ("fintech", "payment", "settlement", "pci", "merchant", "card issuer", "acquirer", "wallet"),
    "public sector": ("agency", "government", "public sector", "citizen", "federal", "municipal", "state department",
                      "county", "taxpayer"),
    "hospitality": ("hotel", "hospitality", "guest", "booking", "occupancy", "resort", "front desk"),
    "higher education": ("university", "college", "student", "campus", "enrollment", "faculty", "registrar"),
    "energy utilities": ("utility", "utilities", "grid", "meter", "outage", "substation", "ratepayer", "energy"),
    "telecommunications": ("telecom", "telco", "subscriber", "network operator", "cell tower", "broadband"),
    "pharmaceuticals": ("pharma", "pharmaceutical", "drug", "gxp", "fda", "clinical trial", "batch record"),
    "media publishing": ("publisher", "newsroom", "editorial", "readership", "paywall", "audience"),
    "agriculture": ("farm", "crop", "harvest", "grower", "agronomy", "acre", "cooperative"),
    "legal services": ("law firm", "legal", "matter", "billable", "litigation", "paralegal", "counsel"),
    "construction": ("construction", "contractor", "job site", "subcontractor", "bid", "jobsite"),
}

# Topics a pain can be about, each with the words that speak to it. A pain reads as its own words plus the words of
# every topic it shares a word with, so "patient data showing up in analytics tools" and "PHI leaking into
# dashboards" are the same worry to the reader who has it.
TOPIC_WORDS: tuple[tuple[str, ...], ...] = (
    ("privacy", "pii", "phi", "personal data", "patient data", "mask", "masking", "redact", "redaction", "leak",
     "exposure", "exposed", "sensitive", "tokenize", "anonymize", "de-identify"),
    ("audit", "auditor", "evidence", "control", "sox", "compliance", "regulator", "regulatory", "examiner", "attest"),
    ("lineage", "provenance", "trace", "traceability", "upstream", "downstream"),
    ("cost", "spend", "bill", "invoice", "budget", "warehouse spend", "credits", "overrun", "chargeback",
     "attribution"),
    ("alert", "alerts", "noise", "noisy", "page", "paging", "on-call", "fatigue", "false positive", "wake"),
    ("incident", "outage", "triage", "root cause", "resolve", "resolution", "mttr", "postmortem", "downtime"),
    ("pipeline", "job", "etl", "dag", "failure", "fail", "broken", "break", "overnight", "retry", "late data"),
    ("dashboard", "report", "reporting", "metric", "kpi", "chart", "stale", "fresh", "freshness"),
    ("manual", "spreadsheet", "hand", "hours", "copy", "paste", "automate", "automation", "staff hours"),
    ("sensor", "iot", "telemetry", "gap", "signal", "device", "edge"),
    ("security review", "questionnaire", "vendor review", "soc 2", "penetration test", "pen test", "trust"),
    ("access", "permission", "role", "entitlement", "least privilege", "sprawl", "sso"),
    ("reconciliation", "reconcile", "mismatch", "ledger", "settlement", "break", "discrepancy"),
    ("residency", "gdpr", "eu", "region", "sovereignty", "data location"),
    ("schema", "schema change", "column", "contract", "breaking change", "migration"),
    ("legacy", "on-prem", "on-premises", "mainframe", "modernize", "modernization", "cloud migration"),
    ("procurement", "approval", "purchasing", "contract vehicle", "rfp", "vendor onboarding"),
    ("eta", "delivery time", "customer update", "tracking", "delay", "late"),
    ("inventory", "stock", "stockout", "out of stock", "replenishment"),
    ("churn", "retention", "renewal", "cancel", "cancellation"),
    ("forecast", "forecasting", "planning", "prediction", "demand"),
    ("scale", "volume", "throughput", "peak", "load", "growth"),
)

# Tools a reader's team may run: an email that names theirs and how it connects speaks to their stack.
TOOLS: tuple[str, ...] = (
    "snowflake", "databricks", "bigquery", "redshift", "airflow", "dbt", "kafka", "pagerduty", "opsgenie",
    "servicenow", "datadog", "splunk", "okta", "salesforce", "tableau", "looker", "power bi", "sap", "epic", "jira",
    "slack", "teams", "workday", "netsuite", "oracle", "postgres", "s3", "azure", "aws", "gcp", "shopify",
)

# The tools a team in an industry is likelier to run (any other tool may be run too).
INDUSTRY_TOOLS: dict[str, tuple[str, ...]] = {
    "healthcare": ("epic", "snowflake", "tableau", "azure"),
    "banking": ("oracle", "servicenow", "splunk", "sap"),
    "retail": ("bigquery", "looker", "pagerduty", "shopify"),
    "saas": ("snowflake", "dbt", "datadog", "pagerduty"),
    "manufacturing": ("sap", "azure", "power bi", "kafka"),
    "logistics": ("airflow", "kafka", "aws", "redshift"),
    "insurance": ("servicenow", "okta", "snowflake", "salesforce"),
    "fintech": ("kafka", "postgres", "datadog", "aws"),
    "public sector": ("oracle", "servicenow", "power bi", "azure"),
}

# Claims that say nothing a reader could check.
HOLLOW: tuple[str, ...] = (
    "industry-leading", "industry leading", "best-in-class", "best in class", "world-class", "cutting-edge",
    "state-of-the-art", "next-generation", "next-gen", "seamless", "seamlessly", "revolutionize", "revolutionary",
    "game-changer", "game-changing", "innovative", "powerful", "robust", "comprehensive", "holistic", "synergy",
    "unlock", "empower", "supercharge", "effortless", "effortlessly", "one-stop", "all-in-one", "turnkey",
    "transformative", "unparalleled", "unmatched", "leading platform", "hope this email finds you",
    "hope you are doing well", "hope you're doing well", "i wanted to reach out", "just reaching out", "touch base",
    "circle back", "take it to the next level", "peace of mind", "drive value", "a fraction of the",
)

# Asks, by what they ask of the reader. A sentence's ask is its first kind found in this order.
ASK_KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("trial", ("trial", "sandbox", "pilot", "try it", "try the", "test drive", "proof of concept", "poc",
               "spin up", "free account")),
    ("resource", ("guide", "report", "case study", "whitepaper", "white paper", "checklist", "one-pager", "deck",
                  "package", "send you", "send over", "share the", "share a", "link", "write-up", "overview")),
    ("meeting", ("call", "meeting", "meet", "chat", "minutes", "calendar", "slot", "demo", "briefing",
                 "conversation", "walk you through", "walkthrough", "time next week", "time this week", "sit down")),
    ("reply", ("reply", "thoughts", "worth", "priority", "relevant", "interested", "open to", "make sense",
               "on your radar", "let me know")),
)

# How a sentence asks for something at all, beyond a question mark.
ASK_OPENERS: tuple[str, ...] = (
    "would you", "could we", "can we", "are you open", "let me know", "shall i", "should i", "do you have",
    "how about", "would it", "could i", "can i", "happy to send", "want me to", "grab", "book", "schedule",
    "reply with", "hit reply", "are you free",
)

# Where a sentence cites a customer: a reader takes it for a peer when the customer is in its own industry.
CUSTOMER_CUES: tuple[str, ...] = (
    "customer", "customers", "client", "clients", "helped", "uses", "used", "team at", "went from", "cut", "reduced",
    "saved", "brought", "case study", "like you", "peers",
)

PRICE_CUES: tuple[str, ...] = ("per month", "per year", "per seat", "per user", "per node", "a month", "a year",
                               "pricing", "price", "priced", "costs", "flat fee", "plan starts")

GREETINGS: tuple[str, ...] = ("hi", "hello", "dear", "hey", "good morning", "good afternoon", "greetings")

STOPWORDS: frozenset[str] = frozenset((
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "into", "on", "for", "with", "by", "at", "from", "as",
    "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that", "these", "those", "our", "your",
    "we", "you", "they", "their", "them", "us", "i", "me", "my", "he", "she", "his", "her", "not", "no", "too", "very",
    "so", "than", "then", "there", "here", "what", "which", "who", "whom", "how", "when", "where", "why", "all", "any",
    "each", "more", "most", "many", "much", "some", "such", "can", "could", "would", "should", "will", "do", "does",
    "did", "have", "has", "had", "get", "gets", "got", "keep", "keeps", "take", "takes", "over", "across", "about",
    "up", "out", "off", "just", "also", "only", "own", "same", "other", "new", "still", "even", "one", "two", "by",
    "faster", "slow", "slower", "growing", "months", "weeks", "lot", "lots", "s", "t", "data",
))
