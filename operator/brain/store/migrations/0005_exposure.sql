-- brain schema v5: exposure receipts. Which conversation was given which memory (by id, version and
-- lineage), with which key, when: the governance question after a poisoned or wrong memory is
-- "who was given it, and were they told" (brain/gateway/retractions.py; docs/gateway.md, "Exposure
-- receipts and retractions"). One row per memory version and conversation: a conversation given the
-- same memory again counts up `injections` and moves `last_at`. Only ids, key names and a hash of the
-- conversation's turns are stored, never text. `noticed_at` is when the conversation was told the
-- memory was retracted. Rows older than spec.gateway.exposure.retentionDays (by `last_at`) are pruned
-- by the gateway. Additive: a new table and its indexes, nothing existing changes.
CREATE TABLE memory_exposures (
  memory_id    text NOT NULL,
  lineage_id   text NOT NULL,
  version      integer NOT NULL,
  namespace    text NOT NULL,
  key_name     text NOT NULL,
  conversation text NOT NULL,
  api          text NOT NULL DEFAULT '',
  injections   integer NOT NULL DEFAULT 1,
  first_at     timestamptz NOT NULL DEFAULT now(),
  last_at      timestamptz NOT NULL DEFAULT now(),
  noticed_at   timestamptz,
  PRIMARY KEY (memory_id, key_name, conversation)
);
CREATE INDEX memory_exposures_lineage ON memory_exposures (lineage_id, last_at DESC);
-- what the gateways reload when a memory is retracted: its conversations not yet told
CREATE INDEX memory_exposures_unnoticed ON memory_exposures (lineage_id) WHERE noticed_at IS NULL;
CREATE INDEX memory_exposures_last ON memory_exposures (last_at);
